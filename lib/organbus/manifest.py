# Freezes the protocol core as the package organbus (/lib/organbus on a board); every board manifest include()s this file.
package("organbus", base_path="..")

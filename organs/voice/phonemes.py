# Phoneme inventory of the voice: one-character codes and their Klatt (1980) style targets.
#
# Targets after Klatt 1980 (Table III) and durations after Klatt 1976/1979 (inherent and
# minimum ms), adapted to 11,025 Hz (frication above 5.5 kHz moved into the top band).
# Columns: code, kind flags, inherent ms, minimum ms, F1 F2 F3, B1 B2 B3, end targets
# F1e F2e F3e (0: no glide), AV, AH, AF (dB, 0..80), parallel A2 A3 A4 A5 AB (dB).
# Stops: AV is the voice bar under the closure, the parallel amplitudes the burst.

from array import array

VOWEL = 1
VOICED = 2
STOP = 4
FRIC = 8
NASAL = 16
GLIDE = 32
DIPH = 64
ASPIR = 128
AFFRIC = 256
LABIAL = 512
ALVEOLAR = 1024
VELAR = 2048

_K = {
    "V": VOWEL | VOICED,
    "D": VOWEL | VOICED | DIPH,
    "L": GLIDE | VOICED,
    "N": NASAL | VOICED,
    "F": FRIC,
    "Z": FRIC | VOICED,
    "P": STOP,
    "B": STOP | VOICED,
    "C": STOP | FRIC | AFFRIC,
    "J": STOP | FRIC | AFFRIC | VOICED,
    "H": ASPIR,
    "l": LABIAL,
    "a": ALVEOLAR,
    "v": VELAR,
}

_TABLE = """
i V   155 55  310 2020 2960  45 200 400   290 2070 2960  60  0  0   0  0  0  0  0
I V   135 40  400 1800 2570  50 100 140   0   0    0     60  0  0   0  0  0  0  0
e D   180 100 480 1720 2520  70 100 200   330 2020 2600  60  0  0   0  0  0  0  0
E V   150 70  530 1680 2500  60 90  200   0   0    0     60  0  0   0  0  0  0  0
a V   230 80  620 1660 2430  70 150 320   650 1490 2470  61  0  0   0  0  0  0  0
A V   240 100 700 1220 2600  130 70 160   0   0    0     61  0  0   0  0  0  0  0
O V   240 100 600 990  2570  90 100 80    630 1040 2600  61  0  0   0  0  0  0  0
o D   220 80  540 1100 2300  80 70  70    450 900  2300  61  0  0   0  0  0  0  0
U V   160 60  450 1100 2350  80 100 80    0   0    0     60  0  0   0  0  0  0  0
u D   210 70  350 1250 2200  65 110 140   320 900  2200  60  0  0   0  0  0  0  0
R V   180 80  470 1270 1540  100 60 110   420 1310 1540  60  0  0   0  0  0  0  0
x V   120 60  500 1400 2300  100 50 140   0   0    0     58  0  0   0  0  0  0  0
V V   140 60  620 1220 2550  80 50  140   0   0    0     60  0  0   0  0  0  0  0
Y D   250 150 660 1200 2550  100 70 200   400 1880 2500  61  0  0   0  0  0  0  0
W D   260 100 640 1230 2550  80 70  140   420 940  2350  61  0  0   0  0  0  0  0
Q D   280 150 550 960  2400  80 50  130   360 1820 2450  61  0  0   0  0  0  0  0
w Ll  80  60  290 610  2150  50 80  60    0   0    0     55  0  0   0  0  0  0  0
y La  80  40  260 2070 3020  40 250 500   0   0    0     55  0  0   0  0  0  0  0
r La  80  30  310 1060 1380  70 100 120   0   0    0     55  0  0   0  0  0  0  0
l La  80  40  310 1050 2880  50 100 280   0   0    0     55  0  0   0  0  0  0  0
m Nl  70  60  480 1270 2130  40 200 200   0   0    0     52  0  0   0  0  0  0  0
n Na  60  50  480 1340 2470  40 300 300   0   0    0     52  0  0   0  0  0  0  0
N Nv  95  60  480 2000 2900  160 150 100  0   0    0     52  0  0   0  0  0  0  0
f Fl  100 80  340 1100 2080  200 120 150  0   0    0     0   0  60  0  0  0  0  57
v Zl  60  40  220 1100 2080  60 90  120   0   0    0     47  0  50  0  0  0  0  57
T Fa  90  60  320 1290 2540  200 90 200   0   0    0     0   0  60  0  0  0  38 48
D Za  50  30  270 1290 2540  60 80  170   0   0    0     47  0  50  0  0  0  35 40
s Fa  105 60  320 1390 2530  200 80 200   0   0    0     0   0  60  0  0  0  62 0
z Za  75  40  240 1390 2530  70 60  180   0   0    0     47  0  52  0  0  0  56 0
S Fa  105 80  300 1840 2750  200 100 300  0   0    0     0   0  60  0  57 48 48 0
Z Za  70  40  300 1840 2750  70 100 300   0   0    0     47  0  52  0  57 48 48 0
h H   80  20  0   0    0     300 150 300  0   0    0     0   60 0   0  0  0  0  0
p Pl  90  50  400 1100 2150  300 150 220  0   0    0     0   0  60  0  0  0  0  63
b Bl  85  60  200 1100 2150  60 110 130   0   0    0     40  0  55  0  0  0  0  63
t Pa  75  50  400 1600 2600  300 120 250  0   0    0     0   0  60  0  47 50 58 0
d Ba  75  50  200 1600 2600  60 100 170   0   0    0     40  0  55  0  47 60 55 0
k Pv  80  60  300 1990 2850  250 160 330  0   0    0     0   0  60  53 53 43 45 0
g Bv  80  60  200 1990 2850  60 150 280   0   0    0     40  0  55  53 53 43 45 0
C Ca  70  50  350 1800 2820  200 90 300   0   0    0     0   0  60  0  57 48 48 0
J Ja  70  50  260 1800 2820  60 80  270   0   0    0     40  0  55  0  57 48 48 0
"""

NFIELD = 20
(
    KIND,
    DUR,
    MINDUR,
    F1,
    F2,
    F3,
    B1,
    B2,
    B3,
    F1E,
    F2E,
    F3E,
    AV,
    AH,
    AF,
    A2,
    A3,
    A4,
    A5,
    AB,
) = range(NFIELD)

CODES = ""
PARAMS = array("h")


def _load():
    global CODES
    codes = []
    for line in _TABLE.split("\n"):
        f = line.split()
        if not f:
            continue
        codes.append(f[0])
        kind = 0
        for c in f[1]:
            kind |= _K[c]
        PARAMS.append(kind)
        for v in f[2:]:
            PARAMS.append(int(v))
    CODES = "".join(codes)


_load()


def index(code):
    """Phoneme index of a one-character code, -1 when unknown."""
    return CODES.find(code)


def get(p, field):
    return PARAMS[p * NFIELD + field]

# The master's network plumbing, written once: URLs, the HTTP/1.1 client with bounded reads, bounded network JSON.

# Network plumbing shared by the links, written once: URLs, the HTTP/1.1 client with bounded reads, bounded network JSON, the WebSocket client.

# Network plumbing shared by the links: the one HTTP/1.1 client, the WebSocket client.

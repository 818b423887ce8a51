// Anchors the runtime library; the runtime's parts live in their own files.

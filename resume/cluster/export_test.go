package cluster

// Held reports what n holds for requests: its inboxes, its watches of other
// instances, and the remote sinks its engine's requests are attached to.
func (n *Node) Held() (inboxes, watches, sinks int) {
	n.mu.Lock()
	inboxes = len(n.inboxes)
	for _, ws := range n.watches {
		watches += len(ws)
	}
	n.mu.Unlock()
	n.side.mu.Lock()
	sinks = len(n.side.sinkWatch)
	n.side.mu.Unlock()
	return inboxes, watches, sinks
}

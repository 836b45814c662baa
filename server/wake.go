package server

// Wake tells the dispatcher that an execution is available now, as a
// trigger through Handler does. It is for a program that enqueues
// executions through the store itself (rune bench, which names its
// executions to follow them before they start): without it they wait for
// the dispatcher's next poll (Config.Dispatch.Poll).
func (s *Server) Wake() { s.wakeDispatcher() }

package ingress

import "context"

// inlinePaused reports whether the route of a synchronous interaction's
// inline attempt is paused (ackd route pause, issue 31.2): then no attempt
// is made before the answer. The request is recorded and answered like an
// asynchronous one (an empty 200), and its row waits, claimed by no
// sweeper, until the route is resumed. If the pause cannot be read, no
// inline attempt either: a paused route must not be performed, and the
// sweep performs the row once it can tell.
func (s *Server) inlinePaused(ctx context.Context, route string) bool {
	paused, err := s.store.RoutePaused(ctx, route)
	if err != nil {
		s.log.Warn("could not read whether the route is paused; no inline attempt, the row is left to the sweep", "route", route, "err", err)
		return true
	}
	if paused {
		s.log.Debug("route paused: no inline attempt, the row waits for the resume", "route", route)
	}
	return paused
}

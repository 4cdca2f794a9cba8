package actorstore

// WaitSpare waits for the spare being made, if one is.
func WaitSpare(s *Spare) { s.wg.Wait() }

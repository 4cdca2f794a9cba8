package repo

// NumPrepared is how many of the Writer's statements are prepared on its
// pool.
func (w *Writer) NumPrepared() int {
	w.smu.Lock()
	defer w.smu.Unlock()
	n := 0
	for _, st := range w.stmts {
		if st != nil {
			n++
		}
	}
	return n
}

package repo

// NumPrepared is how many of the Writer's statements are prepared on its
// pool.
func (w *Writer) NumPrepared() int { return w.stmts.Prepared() }

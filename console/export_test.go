package console

// NonceFor is a fresh nonce for the form that posts to action, for tests
// that post forms without scraping a page first.
func (c *Console) NonceFor(action string) string { return c.nonce(action) }

// Age is age, for its table test.
var Age = age

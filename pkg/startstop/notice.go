package startstop

import (
	"sync"
	"time"
)

// Notice runs say once d from now, unless the returned stop is called
// first: a wait that may be long (a server that takes the connection and
// never answers) says so, and one that is over says nothing more. Once
// stop returns, say has returned or will never run.
func Notice(d time.Duration, say func()) (stop func()) {
	var mu sync.Mutex
	stopped := false
	t := time.AfterFunc(d, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			say()
		}
	})
	return func() {
		t.Stop()
		mu.Lock()
		stopped = true
		mu.Unlock()
	}
}

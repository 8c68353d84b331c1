// Package suggest names the known word nearest a mistyped one: a config
// key, an environment variable, a flag, a task code, a queue, a status.
package suggest

import (
	"fmt"
	"slices"
	"strings"
)

// DidYouMean suggests the candidate nearest key, when it is near enough to
// be a typo.
func DidYouMean(key string, cands []string) string {
	if best := Nearest(key, cands); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return ""
}

// Nearest is the candidate nearest key, when it is near enough to be a
// typo; else "".
func Nearest(key string, cands []string) string {
	best, bestD := "", -1
	for _, c := range slices.Sorted(slices.Values(cands)) {
		if d := editDistance(strings.ToLower(key), strings.ToLower(c)); bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	// The last segment is what was mistyped; allow about a third of it.
	last := key[strings.LastIndexAny(key, "._")+1:]
	if best == "" || bestD > max(2, len(last)/3) {
		return ""
	}
	return best
}

// editDistance is the optimal string alignment distance: insertions,
// deletions, substitutions and transpositions of neighbours cost one.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

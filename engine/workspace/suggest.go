package workspace

import (
	"fmt"
	"strings"
)

// suggest returns ` (did you mean "x"?)` for the candidate closest to name,
// or "" when nothing is close enough to be a likely typo.
func suggest(name string, candidates []string) string {
	best, bestDist := "", -1
	for _, c := range candidates {
		d := editDistance(name, c)
		if bestDist < 0 || d < bestDist || (d == bestDist && c < best) {
			best, bestDist = c, d
		}
	}
	if bestDist < 0 || bestDist > maxTypo(name) {
		return prefixSuggestion(name, candidates)
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// maxTypo scales the tolerated distance with the length, so that short
// names do not suggest unrelated ones.
func maxTypo(name string) int {
	switch n := len([]rune(name)); {
	case n <= 2:
		return 1
	case n <= 5:
		return 2
	default:
		return 3
	}
}

// editDistance is the Levenshtein distance between a and b, counting an
// adjacent transposition as one edit ("tset" is one edit from "test").
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 256 || len(rb) > 256 {
		// Long names are never typos of each other worth computing.
		return len(ra) + len(rb)
	}
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

// prefixSuggestion catches abbreviations: "int" for "integer".
func prefixSuggestion(name string, candidates []string) string {
	if len(name) < 3 {
		return ""
	}
	best := ""
	for _, c := range candidates {
		if strings.HasPrefix(c, name) && (best == "" || c < best) {
			best = c
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// Package suggest finds the word a misspelling was probably meant to be, for
// "did you mean" hints in errors.
package suggest

import "strings"

// Closest returns the candidate nearest to word, ignoring case, when it is
// near enough to be a likely misspelling (an edit distance of at most a
// third of the word's length, at least 1, at most 3) and no other candidate
// is as near. It returns "" otherwise.
func Closest(word string, candidates []string) string {
	limit := min(max(len(word)/3, 1), 3)
	best, bestD, tie := "", limit+1, false
	lw := strings.ToLower(word)
	for _, c := range candidates {
		if c == word {
			continue
		}
		d := distance(lw, strings.ToLower(c), limit)
		switch {
		case d < bestD:
			best, bestD, tie = c, d, false
		case d == bestD && c != best:
			tie = true
		}
	}
	if best == "" || tie {
		return ""
	}
	return best
}

// distance is the edit distance of a and b in bytes, a swap of two
// neighbours counting as one edit (optimal string alignment), or limit+1
// when it is over limit.
func distance(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	// Three rows of the table: two back, one back and this one.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > limit {
			return limit + 1
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return min(prev[len(b)], limit+1)
}

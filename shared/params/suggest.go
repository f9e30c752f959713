package params

import "strings"

// suggest finds the declared name a caller most likely meant: the same
// name in another case or separator style, or one within a small edit
// distance (transpositions count as one edit).
func suggest(name string, accepted []string) (string, bool) {
	norm := normalize(name)
	best, bestDist := "", 3
	for _, candidate := range accepted {
		if normalize(candidate) == norm {
			return candidate, true
		}
		d := editDistance(strings.ToLower(name), strings.ToLower(candidate))
		if d < bestDist && d <= len(name)/3+1 {
			best, bestDist = candidate, d
		}
	}
	return best, best != ""
}

func normalize(s string) string {
	s = strings.ToLower(s)
	return strings.NewReplacer("_", "", "-", "", " ", "").Replace(s)
}

// editDistance is the optimal-string-alignment distance over runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		return 1 << 30 // too long to be a typo of a parameter name
	}
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

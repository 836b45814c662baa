package workflow

import (
	"errors"
	"fmt"
	"math"
	"time"
)

const durationSpellings = `want a Go duration such as "90s", "1h30m" or "500ms", or an ISO 8601 duration such as "PT1H30M", "P1D", "P2DT3H" or "PT0.5S"`

// ParseDuration parses a duration of the DSL: Go spelling ("90s", "1h30m",
// "500ms") or ISO 8601 ("PT1H30M", "P1D", "P2DT3H", "PT0.5S", "P1W"). ISO
// years and months are refused because their length varies. Negative,
// empty or malformed durations are errors that say which spellings are
// accepted.
func ParseDuration(s string) (time.Duration, error) {
	switch {
	case s == "":
		return 0, errors.New("empty duration: " + durationSpellings)
	case s[0] == '-':
		return 0, fmt.Errorf("negative duration %q: a duration must be zero or more", truncate(s))
	case s[0] == 'P':
		d, err := parseISODuration(s[1:])
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q: %v; %s", truncate(s), err, durationSpellings)
		}
		return d, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: %s", truncate(s), durationSpellings)
	}
	if d < 0 {
		return 0, fmt.Errorf("negative duration %q: a duration must be zero or more", truncate(s))
	}
	return d, nil
}

var errDurationOverflow = errors.New("too long (the limit is about 292 years)")

// parseISODuration parses what follows the "P" of an ISO 8601 duration:
// [nW][nD][T[nH][nM][nS]], each designator at most once and in that order;
// only the last number may have a fraction (with "." or ",").
func parseISODuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, errors.New(`nothing after "P"`)
	}
	var total int64
	inTime := false
	last := -1 // rank of the previous designator, to enforce order
	fraction := false
	components := 0
	for s != "" {
		if s[0] == 'T' {
			if inTime {
				return 0, errors.New(`"T" appears twice`)
			}
			inTime = true
			s = s[1:]
			if s == "" {
				return 0, errors.New(`nothing after "T"`)
			}
			continue
		}
		i := 0
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		whole := s[:i]
		frac := ""
		if i < len(s) && (s[i] == '.' || s[i] == ',') {
			j := i + 1
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			frac = s[i+1 : j]
			if frac == "" {
				return 0, errors.New("a decimal sign must be followed by digits")
			}
			i = j
		}
		if whole == "" {
			return 0, fmt.Errorf("want a number at %q", truncate(s))
		}
		if i == len(s) {
			return 0, fmt.Errorf("number %s has no designator (W, D, H, M or S)", whole)
		}
		des := s[i]
		s = s[i+1:]
		rank, unit, err := isoUnit(des, inTime)
		if err != nil {
			return 0, err
		}
		if rank <= last {
			return 0, fmt.Errorf("designator %q repeated or out of order", des)
		}
		if fraction {
			return 0, errors.New("only the last number may have a fraction")
		}
		last, fraction = rank, frac != ""
		v, err := isoValue(whole, frac, unit)
		if err != nil {
			return 0, err
		}
		if total > math.MaxInt64-v {
			return 0, errDurationOverflow
		}
		total += v
		components++
	}
	if components == 0 {
		return 0, errors.New("no number")
	}
	return time.Duration(total), nil
}

// isoUnit returns the rank and length of designator des, in the date part
// or, with inTime, the time part.
func isoUnit(des byte, inTime bool) (int, int64, error) {
	if !inTime {
		switch des {
		case 'Y':
			return 0, 0, errors.New(`years have no fixed length; use days ("P365D")`)
		case 'M':
			return 0, 0, errors.New(`months have no fixed length; use days ("P30D"), or "PT…M" for minutes`)
		case 'W':
			return 0, int64(7 * 24 * time.Hour), nil
		case 'D':
			return 1, int64(24 * time.Hour), nil
		case 'H', 'S':
			return 0, 0, fmt.Errorf(`%q belongs after "T" ("PT1%c")`, des, des)
		}
	} else {
		switch des {
		case 'H':
			return 2, int64(time.Hour), nil
		case 'M':
			return 3, int64(time.Minute), nil
		case 'S':
			return 4, int64(time.Second), nil
		case 'W', 'D':
			return 0, 0, fmt.Errorf(`%q belongs before "T" ("P1%c")`, des, des)
		}
	}
	return 0, 0, fmt.Errorf("unknown designator %q", des)
}

// isoValue computes whole.frac units in nanoseconds without overflowing.
// Every unit is a whole number of seconds, so unit/10^k is exact for the
// nine fraction digits kept (finer digits are below a nanosecond).
func isoValue(whole, frac string, unit int64) (int64, error) {
	var n int64
	for i := 0; i < len(whole); i++ {
		d := int64(whole[i] - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, errDurationOverflow
		}
		n = n*10 + d
	}
	if n > math.MaxInt64/unit {
		return 0, errDurationOverflow
	}
	v := n * unit
	if len(frac) > 9 {
		frac = frac[:9]
	}
	var f, scale int64 = 0, 1
	for i := 0; i < len(frac); i++ {
		f = f*10 + int64(frac[i]-'0')
		scale *= 10
	}
	fv := f * (unit / scale) // < unit, so no overflow
	if v > math.MaxInt64-fv {
		return 0, errDurationOverflow
	}
	return v + fv, nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

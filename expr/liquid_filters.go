package expr

import (
	"errors"
	"math"
	"strings"

	"github.com/osteele/liquid"
)

// registerLiquidJSFilters replaces the filters where github.com/osteele/liquid
// (which follows Ruby's Liquid) renders differently from LiquidJS, the Liquid
// users of notification services know. testdata/liquid holds the goldens.
func registerLiquidJSFilters(e *liquid.Engine) {
	// LiquidJS divides as JavaScript does: 7 | divided_by: 2 is 3.5, not 3.
	// Context numbers are JSON numbers, so an integer division would also
	// surprise with 19.5 | divided_by: 2 giving 9.
	e.RegisterFilter("divided_by", func(a, b float64) (float64, error) {
		if b == 0 {
			return 0, errors.New("divided_by: division by zero")
		}
		return a / b, nil
	})
	// The line break stays after the <br /> (LiquidJS and Ruby's Liquid):
	// a text part of the same mail keeps its lines.
	e.RegisterFilter("newline_to_br", func(s string) string {
		return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "<br />\n")
	})
	// Halves round away from zero (-4.5 | round is -5), as in LiquidJS.
	e.RegisterFilter("round", func(n float64, places func(int) int) float64 {
		exp := math.Pow10(places(0))
		return math.Round(n*exp) / exp
	})
}

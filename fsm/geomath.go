package fsm

import "math"

// Correctly rounded sin, cos and asin for the geo commands.
//
// redis-server computes distances with the C library's sin, cos and asin,
// which on glibc round correctly but in cases too rare to meet; Go's math
// package is off by an ulp in a good share of cases, enough that a stored
// distance (STOREDIST, %.17g) or, once in a while, a fourth decimal or a
// point on a radius's edge differed from Redis's. So these compute in
// double-double arithmetic (about 106 bits, each step an error-free
// transformation) and round once: the result is the double nearest the
// true value, the same bits on every processor, and redis-server's.

// dd is an unevaluated sum hi+lo with |lo| <= ulp(hi)/2: hi is hi+lo
// rounded to a double.
type dd struct{ hi, lo float64 }

func twoSum(a, b float64) dd {
	s := a + b
	bb := s - a
	return dd{s, (a - (s - bb)) + (b - bb)}
}

func quickTwoSum(a, b float64) dd {
	s := a + b
	return dd{s, b - (s - a)}
}

// twoProd is a*b exactly: math.FMA rounds once, on every platform.
func twoProd(a, b float64) dd {
	p := a * b
	return dd{p, math.FMA(a, b, -p)}
}

func (x dd) add(y dd) dd {
	s := twoSum(x.hi, y.hi)
	t := twoSum(x.lo, y.lo)
	s = quickTwoSum(s.hi, s.lo+t.hi)
	return quickTwoSum(s.hi, s.lo+t.lo)
}

func (x dd) neg() dd { return dd{-x.hi, -x.lo} }

func (x dd) mul(y dd) dd {
	p := twoProd(x.hi, y.hi)
	// float64() keeps the compiler from fusing these into one rounding,
	// which would make the low bits depend on the processor.
	return quickTwoSum(p.hi, p.lo+(float64(x.hi*y.lo)+float64(x.lo*y.hi)))
}

func (x dd) div(y dd) dd {
	q1 := x.hi / y.hi
	r := x.add(y.mul(dd{q1, 0}).neg())
	q2 := r.hi / y.hi
	r = r.add(y.mul(dd{q2, 0}).neg())
	q3 := r.hi / y.hi
	return quickTwoSum(q1, q2).add(dd{q3, 0})
}

// pio2 is pi/2 in three parts, 159 bits; ddPio2 its first two.
const (
	pio2Hi  = 1.5707963267948966
	pio2Mid = 6.123233995736766e-17
	pio2Lo  = -1.4973849048591698e-33
)

var ddPio2 = dd{pio2Hi, pio2Mid}

// ddTrigLimit bounds the arguments reduced here; beyond it (only a
// search of a radius past any the geo commands can use reaches it) math's
// own functions answer.
const ddTrigLimit = 1 << 20

// reduce returns r and k with x = k*pi/2 + r, |r| <= pi/4 (about),
// r in double-double: k*pi/2 is taken off in three exact products.
func reduce(x float64) (dd, int) {
	k := math.Round(x / pio2Hi)
	r := dd{x, 0}
	for _, p := range [...]float64{pio2Hi, pio2Mid, pio2Lo} {
		r = r.add(twoProd(k, p).neg())
	}
	return r, int(int64(k) & 3)
}

// sinCosDD are the Taylor series of sin and cos at r, |r| <= pi/4, to
// well below 2^-106.
func sinCosDD(r dd) (s, c dd) {
	r2 := r.mul(r)
	// sin r = r - r^3/3! + ..., cos r = 1 - r^2/2! + ...
	term := r
	s = r
	for n := 2; n < 40; n += 2 {
		term = term.mul(r2).div(dd{float64(n * (n + 1)), 0}).neg()
		s = s.add(term)
		if math.Abs(term.hi) < 1e-40 {
			break
		}
	}
	term = dd{1, 0}
	c = term
	for n := 1; n < 40; n += 2 {
		term = term.mul(r2).div(dd{float64(n * (n + 1)), 0}).neg()
		c = c.add(term)
		if math.Abs(term.hi) < 1e-40 {
			break
		}
	}
	return s, c
}

// sinCosOf returns sin x and cos x in double-double.
func sinCosOf(x float64) (s, c dd) {
	r, k := reduce(x)
	s, c = sinCosDD(r)
	switch k {
	case 1:
		s, c = c, s.neg()
	case 2:
		s, c = s.neg(), c.neg()
	case 3:
		s, c = c.neg(), s
	}
	return s, c
}

// geoSin and geoCos are sin and cos correctly rounded.
func geoSin(x float64) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > ddTrigLimit {
		return math.Sin(x)
	}
	if math.Abs(x) < 1e-8 {
		// sin x = x - x^3/6: the double nearest is x or its neighbour.
		s, _ := sinCosDD(dd{x, 0})
		return s.hi
	}
	s, _ := sinCosOf(x)
	return s.hi
}

func geoCos(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > ddTrigLimit {
		return math.Cos(x)
	}
	_, c := sinCosOf(x)
	return c.hi
}

// geoAsin is asin correctly rounded: math.Asin refined by Newton's
// method on sin in double-double (twice, for the steep slope near 1).
func geoAsin(y float64) float64 {
	if math.IsNaN(y) || math.Abs(y) > 1 || y == 0 {
		return math.Asin(y)
	}
	if math.Abs(y) == 1 {
		return math.Copysign(pio2Hi, y)
	}
	x := dd{math.Asin(y), 0}
	for range 2 {
		s, c := sinCosOf(x.hi)
		// sin and cos at x.hi+x.lo, to first order in x.lo.
		s = s.add(c.mul(dd{x.lo, 0}))
		c = c.add(s.mul(dd{x.lo, 0}).neg())
		x = x.add(s.add(dd{-y, 0}).div(c).neg())
	}
	return x.hi
}

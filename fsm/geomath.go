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

// addFast is add with the low parts summed in one rounding: as exact as
// the series below need, their terms being of one sign and shrinking.
func (x dd) addFast(y dd) dd {
	s := twoSum(x.hi, y.hi)
	return quickTwoSum(s.hi, s.lo+(x.lo+y.lo))
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
	if math.Abs(x) <= math.Pi/4 {
		return dd{x, 0}, 0 // what the subtractions below give for k = 0
	}
	k := math.Round(x / pio2Hi)
	r := dd{x, 0}
	for _, p := range [...]float64{pio2Hi, pio2Mid, pio2Lo} {
		r = r.add(twoProd(k, p).neg())
	}
	return r, int(int64(k) & 3)
}

// The Taylor coefficients of sin r / r and cos r in r^2, (-1)^k/(2k+1)!
// and (-1)^k/(2k)!, as double-double: terms past ddTerms are below
// 2^-60 of the first for |r| <= pi/4 and are summed in float64.
const (
	ddTerms   = 9
	trigTerms = 15
)

var sinCoef, cosCoef = func() (s, c [trigTerms]dd) {
	fact := dd{1, 0} // n!
	for n := 0; n <= 2*trigTerms; n++ {
		if n > 0 {
			fact = fact.mul(dd{float64(n), 0})
		}
		inv := dd{1, 0}.div(fact)
		if (n/2)%2 == 1 {
			inv = inv.neg()
		}
		if n%2 == 0 && n/2 < trigTerms {
			c[n/2] = inv
		} else if n%2 == 1 && n/2 < trigTerms {
			s[n/2] = inv
		}
	}
	return s, c
}()

// series evaluates the polynomial of coef in r2 = r^2 by Horner's rule,
// the small high terms in float64 and the rest in double-double, leaving
// out the terms below 1e-36 (small arguments need few).
func series(coef *[trigTerms]dd, r2 dd) dd {
	n, pow := trigTerms, 1.0
	for k := 1; k < trigTerms; k++ {
		if pow *= r2.hi; math.Abs(coef[k].hi)*pow < 1e-36 {
			n = k
			break
		}
	}
	tail := 0.0
	for k := n - 1; k >= ddTerms; k-- {
		tail = float64(tail*r2.hi) + coef[k].hi
	}
	p := dd{float64(tail * r2.hi), 0}
	for k := min(n, ddTerms) - 1; k >= 0; k-- {
		p = p.addFast(coef[k])
		if k > 0 {
			p = p.mul(r2)
		}
	}
	return p
}

func sinDD(r dd) dd { return r.mul(series(&sinCoef, r.mul(r))) }
func cosDD(r dd) dd { return series(&cosCoef, r.mul(r)) }

// sinCosDD returns sin x and cos x in double-double (only the first when
// !both, to halve the work).
func sinCosOf(x float64, both bool) (s, c dd) {
	r, k := reduce(x)
	// sin x by quadrant: sin r, cos r, -sin r, -cos r; cos x: cos r,
	// -sin r, -cos r, sin r.
	sinR, cosR := k%2 == 0 || both, k%2 == 1 || both
	var sr, cr dd
	if sinR {
		sr = sinDD(r)
	}
	if cosR {
		cr = cosDD(r)
	}
	switch k {
	case 0:
		s, c = sr, cr
	case 1:
		s, c = cr, sr.neg()
	case 2:
		s, c = sr.neg(), cr.neg()
	case 3:
		s, c = cr.neg(), sr
	}
	return s, c
}

// cosOf is cos x in double-double.
func cosOf(x float64) dd {
	r, k := reduce(x)
	switch k {
	case 0:
		return cosDD(r)
	case 1:
		return sinDD(r).neg()
	case 2:
		return cosDD(r).neg()
	}
	return sinDD(r)
}

// geoSin and geoCos are sin and cos correctly rounded.
func geoSin(x float64) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > ddTrigLimit {
		return math.Sin(x)
	}
	s, _ := sinCosOf(x, false)
	return s.hi
}

func geoCos(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > ddTrigLimit {
		return math.Cos(x)
	}
	return cosOf(x).hi
}

// geoAsin is asin correctly rounded: math.Asin refined by Newton's
// method on sin, x -= (sin x - y) / cos x, with sin in double-double. The
// correction is tiny, so its divisor needs no more than float64, which
// sqrt((1-y)(1+y)) gives even near 1 (1-y is exact there). A step squares
// the error; near 1, where math.Asin strays most, two are taken.
func geoAsin(y float64) float64 {
	if math.IsNaN(y) || math.Abs(y) > 1 || y == 0 {
		return math.Asin(y)
	}
	if math.Abs(y) == 1 {
		return math.Copysign(pio2Hi, y)
	}
	c := math.Sqrt(float64((1 - y) * (1 + y)))
	x := dd{math.Asin(y), 0}
	steps := 1
	if math.Abs(y) > 0.9 {
		steps = 2
	}
	for range steps {
		s, _ := sinCosOf(x.hi, false)
		// sin at x.hi+x.lo, to first order in x.lo.
		s = s.add(dd{float64(c * x.lo), 0})
		x = x.add(dd{-s.add(dd{-y, 0}).hi / c, 0})
	}
	return x.hi
}

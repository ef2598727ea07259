package fsm

import (
	"math"
	"math/rand"
	"testing"
)

// TestGeoMathRounding: sin, cos and asin where Go's math package and the C
// library redis-server uses (glibc 2.36) differ, the C library's being
// the correctly rounded value (checked with 200-bit arithmetic).
func TestGeoMathRounding(t *testing.T) {
	for _, tc := range []struct {
		f       string
		x, want float64
	}{
		{"sin", 2.779997122185401, 0.35376703701920476},
		{"sin", -2.138769811537797, -0.8429928182499875},
		{"sin", 2.3336048350683942, 0.722898313056695},
		{"sin", -2.7323077635938544, -0.39795338384411494},
		{"sin", 1.2226874369747671, 0.940019490257459},
		{"sin", 0.5068069190117419, 0.48538801905501133},
		{"cos", -0.17188672810947336, 0.9852638117916312},
		{"cos", -2.434429052055489, -0.7602076832516113},
		{"cos", 2.0817268590427593, -0.48898915232026885},
		{"cos", -1.8665038372486515, -0.2914167248170614},
		{"cos", -1.4527180875244106, 0.11780404675664542},
		{"cos", 0.19611734435405292, 0.980830553252241},
		{"asin", 0.999999056643283, 1.5694227498110438},
		{"asin", 0.11320596465314436, 0.11344917006279794},
		{"asin", 0.9999992342745484, 1.5695588086743635},
		{"asin", 0.13876741839890316, 0.13921668250487534},
		{"asin", 0.9999997106948323, 1.5700356623726175},
		{"asin", 0.6778304772505923, 0.7448077499621608},
		// Near 1 Go's asin strays by up to 17 ulps.
		{"asin", 0.999975, 1.5637252442515495},
		{"asin", 0.99999999, 1.5706549054381862},
		{"asin", 0.9999999999, 1.5707821846586878},
		{"asin", 0.998215, 1.511037958503602},
		{"asin", 0.121445, 0.1217455286973423},
	} {
		var got float64
		switch tc.f {
		case "sin":
			got = geoSin(tc.x)
		case "cos":
			got = geoCos(tc.x)
		case "asin":
			got = geoAsin(tc.x)
		}
		if got != tc.want {
			t.Errorf("%s(%v) = %v, want %v", tc.f, tc.x, got, tc.want)
		}
	}
}

// TestGeoMathRange: over the arguments the geo commands use, and past
// them, sin and cos are within two ulps of Go's (which are within two of
// the truth), and the special values are math's.
func TestGeoMathRange(t *testing.T) {
	ulps := func(a, b float64) uint64 {
		x, y := math.Float64bits(a), math.Float64bits(b)
		if x > y {
			return x - y
		}
		return y - x
	}
	for i := range 200001 {
		x := -7 + 14*float64(i)/200000
		if d := ulps(geoSin(x), math.Sin(x)); d > 2 && math.Abs(math.Sin(x)) > 1e-15 {
			t.Fatalf("sin(%v) = %v, math says %v", x, geoSin(x), math.Sin(x))
		}
		if d := ulps(geoCos(x), math.Cos(x)); d > 2 && math.Abs(math.Cos(x)) > 1e-15 {
			t.Fatalf("cos(%v) = %v, math says %v", x, geoCos(x), math.Cos(x))
		}
	}
	for _, x := range []float64{0, math.Copysign(0, -1), 1e-300, -1e-9, 5e-324, 1e7, 3e6} {
		if d := ulps(geoSin(x), math.Sin(x)); d > 1 {
			t.Errorf("sin(%v) = %v, math says %v", x, geoSin(x), math.Sin(x))
		}
	}
	for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if !math.IsNaN(geoSin(x)) || !math.IsNaN(geoCos(x)) {
			t.Errorf("sin or cos of %v is not NaN", x)
		}
	}
	for y, want := range map[float64]float64{1: math.Pi / 2, -1: -math.Pi / 2, 0: 0} {
		if got := geoAsin(y); got != want {
			t.Errorf("asin(%v) = %v, want %v", y, got, want)
		}
	}
	if !math.IsNaN(geoAsin(1.0000000000000002)) || !math.IsNaN(geoAsin(math.NaN())) {
		t.Error("asin past 1 is not NaN")
	}
}

// withinExact is within as it was before the fast rejection: the correctly
// rounded distance for every point.
func (sh *geoShape) withinExact(lon, lat float64) (float64, bool) {
	cosLat := geoCosLat(sh.lat)
	cosPoint := geoCosLat(lat)
	if !sh.box {
		d := geoDistanceCos(sh.lon, sh.lat, lon, lat, cosLat, cosPoint)
		return d, !(d > sh.radius*sh.conversion)
	}
	widthM, heightM := sh.width*sh.conversion, sh.height*sh.conversion
	if geoLatDistance(sh.lat, lat) > heightM/2 {
		return 0, false
	}
	if geoDistanceCos(lon, lat, sh.lon, lat, cosPoint, cosPoint) > widthM/2 {
		return 0, false
	}
	return geoDistanceCos(sh.lon, sh.lat, lon, lat, cosLat, cosPoint), true
}

// TestGeoWithinFast: the fast rejection never changes within's answer,
// for points anywhere and for points whose distance is the shape's edge
// to the last ulp (the limit set from the point's own distance), circles
// and boxes, small and antipodal.
func TestGeoWithinFast(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	lon := func() float64 { return r.Float64()*360 - 180 }
	lat := func() float64 { return r.Float64()*170.1 - 85.05 }
	check := func(sh geoShape, plon, plat float64) {
		t.Helper()
		d1, in1 := sh.within(plon, plat)
		d2, in2 := sh.withinExact(plon, plat)
		if in1 != in2 || in1 && d1 != d2 {
			t.Fatalf("shape %+v, point %v,%v: within %v %v, exact %v %v", sh, plon, plat, d1, in1, d2, in2)
		}
	}
	for i := 0; i < 200000; i++ {
		clon, clat := lon(), lat()
		plon, plat := lon(), lat()
		if i%2 == 0 {
			// A point near the centre.
			scale := math.Pow(10, -r.Float64()*6)
			plon = math.Max(-180, math.Min(180, clon+(r.Float64()-0.5)*scale))
			plat = math.Max(-85.05, math.Min(85.05, clat+(r.Float64()-0.5)*scale))
		}
		exact := geoDistance(clon, clat, plon, plat)
		for _, radius := range []float64{r.Float64() * 2e7, exact, math.Nextafter(exact, 0), math.Nextafter(exact, math.Inf(1)), exact * (1 - 1e-7), exact + 0.5} {
			check(geoShape{lon: clon, lat: clat, radius: radius, conversion: 1}, plon, plat)
		}
		w := 2 * geoDistance(plon, plat, clon, plat)
		for _, width := range []float64{r.Float64() * 4e7, w, math.Nextafter(w, 0), w * (1 + 1e-7)} {
			check(geoShape{box: true, lon: clon, lat: clat, width: width, height: r.Float64() * 4e7, conversion: 1}, plon, plat)
		}
	}
}

package fsm

import (
	"math"
	"strconv"
)

// Geohashes, as Redis 7.0's geohash.c and geohash_helper.c compute them,
// operation for operation, so that a score, a decoded position, the boxes a
// search visits and a distance come out as redis-server's do.
//
// A geo set is a sorted set whose scores are 52-bit geohashes: 26 bits of
// longitude and 26 of latitude interleaved, latitude in Redis's range of
// -85.05112878..85.05112878 (Web Mercator's), not the standard -90..90
// (GEOHASH re-encodes in that one). Products that a sum follows are
// written float64(x*y) + z, which keeps the compiler from fusing them into
// one rounding: C compiled for plain x86-64 rounds each, and every replica
// must compute the same bits whatever its processor.

const (
	geoLongMin = -180
	geoLongMax = 180
	geoLatMin  = -85.05112878
	geoLatMax  = 85.05112878
	geoStepMax = 26 // 26*2 = 52 bits

	earthRadiusMeters = 6372797.560856
	mercatorMax       = 20037726.37
)

// geoDR is Redis's D_R, M_PI / 180.0 as C computes it: the double nearest
// pi, divided in double precision (Go would fold the constant expression
// exactly and round once).
var geoDR = func() float64 { pi := float64(math.Pi); return pi / 180.0 }()

func degRad(ang float64) float64 { return ang * geoDR }
func radDeg(ang float64) float64 { return ang / geoDR }

// geoHashBits is a geohash of step*2 bits (GeoHashBits); the zero value,
// bits and step 0, is Redis's "no area".
type geoHashBits struct {
	bits uint64
	step uint8
}

func (h geoHashBits) isZero() bool { return h.bits == 0 && h.step == 0 }

type geoRange struct{ min, max float64 }

// geoArea is the area a hash names (GeoHashArea).
type geoArea struct {
	hash           geoHashBits
	longitude, lat geoRange
}

var (
	geoLongRange = geoRange{geoLongMin, geoLongMax}
	geoLatRange  = geoRange{geoLatMin, geoLatMax}
)

func interleave64(xlo, ylo uint32) uint64 {
	b := [...]uint64{0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F, 0x00FF00FF00FF00FF, 0x0000FFFF0000FFFF}
	s := [...]uint{1, 2, 4, 8, 16}
	x, y := uint64(xlo), uint64(ylo)
	for i := 4; i >= 0; i-- {
		x = (x | x<<s[i]) & b[i]
		y = (y | y<<s[i]) & b[i]
	}
	return x | y<<1
}

func deinterleave64(interleaved uint64) uint64 {
	b := [...]uint64{0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F, 0x00FF00FF00FF00FF, 0x0000FFFF0000FFFF, 0x00000000FFFFFFFF}
	s := [...]uint{0, 1, 2, 4, 8, 16}
	x, y := interleaved, interleaved>>1
	for i := range b {
		x = (x | x>>s[i]) & b[i]
		y = (y | y>>s[i]) & b[i]
	}
	return x | y<<32
}

// geohashEncode is geohashEncode: ok is false for a position outside
// Redis's limits or the ranges.
func geohashEncode(lonR, latR geoRange, longitude, latitude float64, step uint8) (geoHashBits, bool) {
	if step > 32 || step == 0 || latR.max-latR.min == 0 || lonR.max-lonR.min == 0 {
		return geoHashBits{}, false
	}
	if longitude > geoLongMax || longitude < geoLongMin || latitude > geoLatMax || latitude < geoLatMin {
		return geoHashBits{}, false
	}
	if latitude < latR.min || latitude > latR.max || longitude < lonR.min || longitude > lonR.max {
		return geoHashBits{step: step}, false
	}
	latOffset := (latitude - latR.min) / (latR.max - latR.min)
	longOffset := (longitude - lonR.min) / (lonR.max - lonR.min)
	latOffset *= float64(uint64(1) << step)
	longOffset *= float64(uint64(1) << step)
	return geoHashBits{bits: interleave64(uint32(latOffset), uint32(longOffset)), step: step}, true
}

// geohashDecode is geohashDecode: the area a hash names.
func geohashDecode(lonR, latR geoRange, h geoHashBits) (geoArea, bool) {
	if h.isZero() || latR.max-latR.min == 0 || lonR.max-lonR.min == 0 {
		return geoArea{}, false
	}
	sep := deinterleave64(h.bits) // [LAT][LONG]
	latScale := latR.max - latR.min
	longScale := lonR.max - lonR.min
	ilato := uint32(sep)
	ilono := uint32(sep >> 32)
	div := float64(uint64(1) << h.step)
	a := geoArea{hash: h}
	a.lat.min = latR.min + float64(float64(ilato)*1.0/div*latScale)
	a.lat.max = latR.min + float64(float64(ilato+1)*1.0/div*latScale) // uint32 arithmetic, as C's
	a.longitude.min = lonR.min + float64(float64(ilono)*1.0/div*longScale)
	a.longitude.max = lonR.min + float64(float64(ilono+1)*1.0/div*longScale)
	return a, true
}

// center is geohashDecodeAreaToLongLat: the middle of the area, within
// Redis's limits.
func (a geoArea) center() (lon, lat float64) {
	lon = (a.longitude.min + a.longitude.max) / 2
	lon = min(max(lon, geoLongMin), geoLongMax)
	lat = (a.lat.min + a.lat.max) / 2
	lat = min(max(lat, geoLatMin), geoLatMax)
	return lon, lat
}

// cUint64 is C's (uint64_t) conversion of a double as gcc compiles it for
// x86-64, out of range values included: below 2^63 the signed conversion
// (cvttsd2si, whose invalid result is 1<<63), at or above it the signed
// conversion of d-2^63 with the top bit flipped. Redis casts any score,
// even one ZADD stored that no GEOADD made, so a geo command on such a
// member decodes what redis-server decodes.
func cUint64(d float64) uint64 {
	const two63 = 9223372036854775808.0
	if d < two63 {
		return uint64(cInt64(d))
	}
	return uint64(cInt64(d-two63)) ^ (1 << 63)
}

// cInt64 is C's (long long) conversion of a double on x86-64 (cvttsd2si):
// truncation, and 1<<63 for NaN and what does not fit.
func cInt64(d float64) int64 {
	if math.IsNaN(d) || d >= 9223372036854775808.0 || d < -9223372036854775808.0 {
		return math.MinInt64
	}
	return int64(d)
}

// decodeGeoScore is Redis's decodeGeohash: the position a score stands
// for (always decodable: the step is never zero).
func decodeGeoScore(score float64) (lon, lat float64) {
	a, _ := geohashDecode(geoLongRange, geoLatRange, geoHashBits{bits: cUint64(score), step: geoStepMax})
	return a.center()
}

// GeoScore is the score GEOADD gives a valid position: its 52-bit hash.
func GeoScore(lon, lat float64) float64 {
	h, _ := geohashEncode(geoLongRange, geoLatRange, lon, lat, geoStepMax)
	return float64(geohashAlign52Bits(h))
}

func geohashAlign52Bits(h geoHashBits) uint64 { return h.bits << (52 - uint(h.step)*2) }

// ValidGeoPosition reports whether a longitude and latitude are within
// Redis's limits (extractLongLatOrReply).
func ValidGeoPosition(lon, lat float64) bool {
	return !(lon < geoLongMin || lon > geoLongMax || lat < geoLatMin || lat > geoLatMax)
}

const geoAlphabet = "0123456789bcdefghjkmnpqrstuvwxyz"

// geohashString is GEOHASH's 11 characters for a score: the position
// re-encoded with the standard latitude range, the last character always
// '0' (52 bits make 10 characters and 2 bits).
func geohashString(score float64) []byte {
	lon, lat := decodeGeoScore(score)
	h, _ := geohashEncode(geoRange{-180, 180}, geoRange{-90, 90}, lon, lat, 26)
	buf := make([]byte, 11)
	for i := range 11 {
		idx := 0
		if i < 10 {
			idx = int(h.bits>>(52-(uint(i)+1)*5)) & 0x1f
		}
		buf[i] = geoAlphabet[idx]
	}
	return buf
}

func geohashMoveX(h *geoHashBits, d int) {
	if d == 0 {
		return
	}
	x := h.bits & 0xaaaaaaaaaaaaaaaa
	y := h.bits & 0x5555555555555555
	zz := uint64(0x5555555555555555) >> (64 - uint(h.step)*2)
	if d > 0 {
		x = x + (zz + 1)
	} else {
		x = x | zz
		x = x - (zz + 1)
	}
	x &= 0xaaaaaaaaaaaaaaaa >> (64 - uint(h.step)*2)
	h.bits = x | y
}

func geohashMoveY(h *geoHashBits, d int) {
	if d == 0 {
		return
	}
	x := h.bits & 0xaaaaaaaaaaaaaaaa
	y := h.bits & 0x5555555555555555
	zz := uint64(0xaaaaaaaaaaaaaaaa) >> (64 - uint(h.step)*2)
	if d > 0 {
		y = y + (zz + 1)
	} else {
		y = y | zz
		y = y - (zz + 1)
	}
	y &= 0x5555555555555555 >> (64 - uint(h.step)*2)
	h.bits = x | y
}

// geoNeighbors are a hash's eight neighbours (GeoHashNeighbors).
type geoNeighbors struct {
	north, east, west, south                   geoHashBits
	northEast, southEast, northWest, southWest geoHashBits
}

func geohashNeighbors(h geoHashBits) geoNeighbors {
	move := func(dx, dy int) geoHashBits {
		n := h
		geohashMoveX(&n, dx)
		geohashMoveY(&n, dy)
		return n
	}
	return geoNeighbors{
		east: move(1, 0), west: move(-1, 0), south: move(0, -1), north: move(0, 1),
		northWest: move(-1, 1), northEast: move(1, 1), southEast: move(1, -1), southWest: move(-1, -1),
	}
}

// geoShape is a search's area (GeoShape): a circle of radius, or a box of
// width by height, both in the unit conversion says (meters per unit),
// around lon, lat.
type geoShape struct {
	box           bool
	lon, lat      float64
	radius        float64
	width, height float64
	conversion    float64

	// cosLat is the centre's geoCosLat once cosKnown: computed for the
	// first point, used for all; fastA is geoFastBound of the radius.
	cosLat   float64
	fastA    float64
	cosKnown bool
}

// geohashEstimateStepsByRadius is the step of the nine boxes that cover a
// search of radius meters around latitude lat.
func geohashEstimateStepsByRadius(rangeMeters, lat float64) int {
	if rangeMeters == 0 {
		return 26
	}
	step := 1
	for rangeMeters < mercatorMax {
		rangeMeters *= 2
		step++
	}
	step -= 2 // make sure range is included in most of the base cases
	// Wider towards the poles.
	if lat > 66 || lat < -66 {
		step--
		if lat > 80 || lat < -80 {
			step--
		}
	}
	return min(max(step, 1), 26)
}

// boundingBox is geohashBoundingBox: min longitude, min latitude, max
// longitude, max latitude of the shape.
func (sh *geoShape) boundingBox() [4]float64 {
	r := sh.radius
	if sh.box {
		r = sh.height / 2
	}
	height := sh.conversion * r
	if sh.box {
		r = sh.width / 2
	}
	width := sh.conversion * r
	latDelta := radDeg(height / earthRadiusMeters)
	longDeltaTop := radDeg(width / earthRadiusMeters / geoCos(degRad(sh.lat+latDelta)))
	longDeltaBottom := radDeg(width / earthRadiusMeters / geoCos(degRad(sh.lat-latDelta)))
	var b [4]float64
	if sh.lat < 0 { // the southern hemisphere's box is widest at its top
		b[0], b[2] = sh.lon-longDeltaBottom, sh.lon+longDeltaBottom
	} else {
		b[0], b[2] = sh.lon-longDeltaTop, sh.lon+longDeltaTop
	}
	b[1] = sh.lat - latDelta
	b[3] = sh.lat + latDelta
	return b
}

// geoBoxes are the hashes a search visits in Redis's order: the centre's
// box, then north, south, east, west, north-east, north-west, south-east,
// south-west; a zero hash is a box left out.
func (sh *geoShape) geoBoxes() [9]geoHashBits {
	bounds := sh.boundingBox()
	minLon, minLat, maxLon, maxLat := bounds[0], bounds[1], bounds[2], bounds[3]
	radiusMeters := sh.radius
	if sh.box {
		radiusMeters = math.Sqrt(float64((sh.width/2)*(sh.width/2)) + float64((sh.height/2)*(sh.height/2)))
	}
	radiusMeters *= sh.conversion

	steps := geohashEstimateStepsByRadius(radiusMeters, sh.lat)
	hash, _ := geohashEncode(geoLongRange, geoLatRange, sh.lon, sh.lat, uint8(steps))
	nb := geohashNeighbors(hash)
	area, _ := geohashDecode(geoLongRange, geoLatRange, hash)

	// The estimated step may be too coarse when the area is near an edge
	// of its box: one of the four sides' boxes does not reach the bounds.
	north, _ := geohashDecode(geoLongRange, geoLatRange, nb.north)
	south, _ := geohashDecode(geoLongRange, geoLatRange, nb.south)
	east, _ := geohashDecode(geoLongRange, geoLatRange, nb.east)
	west, _ := geohashDecode(geoLongRange, geoLatRange, nb.west)
	decrease := north.lat.max < maxLat || south.lat.min > minLat ||
		east.longitude.max < maxLon || west.longitude.min > minLon
	if steps > 1 && decrease {
		steps--
		hash, _ = geohashEncode(geoLongRange, geoLatRange, sh.lon, sh.lat, uint8(steps))
		nb = geohashNeighbors(hash)
		area, _ = geohashDecode(geoLongRange, geoLatRange, hash)
	}

	// Leave out the boxes that cannot hold a point of the area.
	if steps >= 2 {
		if area.lat.min < minLat {
			nb.south, nb.southWest, nb.southEast = geoHashBits{}, geoHashBits{}, geoHashBits{}
		}
		if area.lat.max > maxLat {
			nb.north, nb.northEast, nb.northWest = geoHashBits{}, geoHashBits{}, geoHashBits{}
		}
		if area.longitude.min < minLon {
			nb.west, nb.southWest, nb.northWest = geoHashBits{}, geoHashBits{}, geoHashBits{}
		}
		if area.longitude.max > maxLon {
			nb.east, nb.southEast, nb.northEast = geoHashBits{}, geoHashBits{}, geoHashBits{}
		}
	}
	return [9]geoHashBits{hash, nb.north, nb.south, nb.east, nb.west, nb.northEast, nb.northWest, nb.southEast, nb.southWest}
}

// geoLatDistance is geohashGetLatDistance: meters along a meridian.
func geoLatDistance(lat1, lat2 float64) float64 {
	return earthRadiusMeters * math.Abs(degRad(lat2)-degRad(lat1))
}

// geoDistance is geohashGetDistance: the haversine distance in meters.
func geoDistance(lon1, lat1, lon2, lat2 float64) float64 {
	return geoDistanceCos(lon1, lat1, lon2, lat2, geoCosLat(lat1), geoCosLat(lat2))
}

// geoCosLat is the cosine of a latitude in degrees, as geohashGetDistance
// computes it.
func geoCosLat(lat float64) float64 { return geoCos(degRad(lat)) }

// geoDistanceCos is geoDistance given the latitudes' cosines (geoCosLat),
// which a search computes once: the centre's for all its points, a
// point's for its two distances.
func geoDistanceCos(lon1, lat1, lon2, lat2, cos1, cos2 float64) float64 {
	lon1r := degRad(lon1)
	lon2r := degRad(lon2)
	v := geoSin((lon2r - lon1r) / 2)
	if v == 0.0 {
		return geoLatDistance(lat1, lat2)
	}
	lat1r := degRad(lat1)
	lat2r := degRad(lat2)
	u := geoSin((lat2r - lat1r) / 2)
	a := float64(u*u) + float64(cos1*cos2*v*v)
	return 2.0 * earthRadiusMeters * geoAsin(math.Sqrt(a))
}

// within is geoWithinShape for a point decoded from a score: whether it is
// in the shape, and its distance in meters from the centre. The correctly
// rounded distance costs about ten times math's: a point that math's
// distance puts clearly outside (geoFastMargin) is left without it, and
// only those near or inside the edge get it.
func (sh *geoShape) within(lon, lat float64) (float64, bool) {
	if !sh.cosKnown {
		sh.cosLat, sh.cosKnown = geoCosLat(sh.lat), true
		sh.fastA = geoFastBound(sh.radius * sh.conversion)
	}
	if !sh.box {
		limit := sh.radius * sh.conversion
		// No great circle is shorter than the meridian's arc between the
		// two latitudes.
		if geoLatDistance(sh.lat, lat) > limit+geoFastMargin(limit) ||
			geoHaversineFast(sh.lon, sh.lat, lon, lat, sh.cosLat, math.Cos(degRad(lat))) > sh.fastA {
			return 0, false
		}
		d := geoDistanceCos(sh.lon, sh.lat, lon, lat, sh.cosLat, geoCosLat(lat))
		return d, !(d > limit)
	}
	widthM, heightM := sh.width*sh.conversion, sh.height*sh.conversion
	if geoLatDistance(sh.lat, lat) > heightM/2 {
		return 0, false
	}
	if cos := math.Cos(degRad(lat)); geoHaversineFast(lon, lat, sh.lon, lat, cos, cos) > geoFastBound(widthM/2) {
		return 0, false
	}
	cosPoint := geoCosLat(lat)
	if geoDistanceCos(lon, lat, sh.lon, lat, cosPoint, cosPoint) > widthM/2 {
		return 0, false
	}
	return geoDistanceCos(sh.lon, sh.lat, lon, lat, sh.cosLat, cosPoint), true
}

// geoHaversineFast is the haversine of geoDistanceCos's angle, the value
// it takes the arcsine of the root of, with math's sin and cos (the
// point's latitude's given as cos2): each within an ulp or two of the
// true value, so the sum is within a few ulps of the exact one.
// geoFastBound turns a limit in meters into the same terms, widened by
// geoFastMargin: a point whose value exceeds the bound is beyond the limit
// by the correctly rounded distance too, the margin being far beyond the
// error of either side (a millionth, where these errors are ulps; near the
// antipode, where the haversine's slope vanishes, the meter still leaves
// them a factor of 10^5).
func geoHaversineFast(lon1, lat1, lon2, lat2, cos1, cos2 float64) float64 {
	v := math.Sin((degRad(lon2) - degRad(lon1)) / 2)
	u := math.Sin((degRad(lat2) - degRad(lat1)) / 2)
	return u*u + cos1*cos2*v*v
}

// geoFastBound is the haversine of a distance of limit meters and its
// margin: above 1 (nothing is rejected) from half the earth's
// circumference on.
func geoFastBound(limit float64) float64 {
	x := (limit + geoFastMargin(limit)) / (2 * earthRadiusMeters)
	if !(x < math.Pi/2) {
		return 2
	}
	sx := math.Sin(x)
	return sx * sx
}

// geoFastMargin is the distance past a limit (meters) beyond which the
// fast tests decide alone: a meter and a millionth of the limit.
func geoFastMargin(limit float64) float64 { return 1 + limit*1e-6 }

// formatGeoDistance is addReplyDoubleDistance's text: d rounded (llrint,
// to even) to 4 decimals, as fixedpoint_d2string writes it.
func formatGeoDistance(d float64) []byte {
	if d == 0 {
		return []byte("0.0000")
	}
	sv := cRint(d * 10000)
	var buf []byte
	var v uint64
	if sv < 0 {
		buf = append(buf, '-')
		v = uint64(-(sv + 1)) + 1
	} else {
		v = uint64(sv)
	}
	digits := strconv.AppendUint(nil, v, 10)
	for len(digits) < 5 {
		digits = append([]byte{'0'}, digits...)
	}
	buf = append(buf, digits[:len(digits)-4]...)
	buf = append(buf, '.')
	return append(buf, digits[len(digits)-4:]...)
}

// cRint is llrint on x86-64: round to even, 1<<63 for what does not fit.
func cRint(d float64) int64 { return cInt64(math.RoundToEven(d)) }

// formatGeoCoord is addReplyHumanLongDouble's text for a coordinate:
// "%.17Lf" with the trailing zeros (and a trailing dot) cut, "-0" as "0".
func formatGeoCoord(d float64) []byte {
	return trimHuman(strconv.AppendFloat(nil, d, 'f', 17, 64))
}

// FormatGeoPairValue is a coordinate as the error of an invalid pair
// shows it: C's "%f".
func FormatGeoPairValue(d float64) string {
	switch {
	case math.IsInf(d, 1):
		return "inf"
	case math.IsInf(d, -1):
		return "-inf"
	}
	return strconv.FormatFloat(d, 'f', 6, 64)
}

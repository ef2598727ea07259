package fsm

import (
	"encoding/binary"
	"math"
	"slices"
)

// The geo commands, as Redis 7.0's geo.c runs them. A geo set is a sorted
// set (geohash.go says what its scores are): GEOADD is ZADD with the
// scores it computes (the server builds an OpZAdd), and the reads below
// read sorted sets.

// Op numbers are part of the log format: append only. Every geo op has
// level 3 (level.go): an older kvs cannot apply it.
const (
	// OpGeoPos: Args[0]=key, Args[1:]=members. Reply an array holding for
	// each member [longitude, latitude] (doubles) or a nil array.
	OpGeoPos Op = opBaseGeo + iota
	// OpGeoDist: Args[0]=key, Args[1], Args[2]=members, Float=meters per
	// unit (> 0). Reply the distance (bulk, 4 decimals) or nil.
	OpGeoDist
	// OpGeoHash: Args[0]=key, Args[1:]=members. Reply an array of
	// 11-character geohashes (bulk) or nil.
	OpGeoHash
	// OpGeoSearch (GEOSEARCH, GEORADIUS and GEORADIUSBYMEMBER without
	// STORE, their _RO forms, and any of them whose arguments are wrong):
	// Args[0]=key, Args[1]=the area (GeoArea), Args[2:]=the steps
	// (GeoStepMember, GeoStepError). Flags: FlagGeoBox, FlagGeoWithDist,
	// FlagGeoWithHash, FlagGeoWithCoord, FlagGeoAsc, FlagGeoDesc,
	// FlagGeoAny; Int=COUNT (0: none). Reply an array of members, or of
	// [member, distance?, hash?, [longitude, latitude]?].
	OpGeoSearch
	// OpGeoSearchStore (GEOSEARCHSTORE, GEORADIUS and GEORADIUSBYMEMBER
	// with STORE or STOREDIST): Args[0]=destination, then as
	// OpGeoSearch. FlagGeoStoreDist stores distances (in the unit) as
	// scores instead of the hashes; FlagGeoRadius names GEORADIUS's
	// event. Reply :count stored; a result of
	// none deletes the destination.
	OpGeoSearchStore
)

// Flags of OpGeoSearch and OpGeoSearchStore.
const (
	FlagGeoBox Flags = 1 << iota
	FlagGeoWithDist
	FlagGeoWithHash
	FlagGeoWithCoord
	FlagGeoAsc
	FlagGeoDesc
	FlagGeoAny
	FlagGeoStoreDist
	// FlagGeoRadius: the store is GEORADIUS's (its event is
	// georadiusstore, GEOSEARCHSTORE's geosearchstore).
	FlagGeoRadius
)

// ErrGeoMember is the error of a centre member that the set lacks.
const ErrGeoMember = "ERR could not decode requested zset member"

const geoSearchFlags = FlagGeoBox | FlagGeoWithDist | FlagGeoWithHash | FlagGeoWithCoord | FlagGeoAsc | FlagGeoDesc | FlagGeoAny

func init() {
	registerOp(OpGeoPos, opSpec{name: "GEOPOS", args: argsAtLeast(1), read: readGeoPos, level: 3})
	registerOp(OpGeoDist, opSpec{name: "GEODIST", args: 3, read: readGeoDist, level: 3,
		check: func(c *Command) error {
			if !(c.Float > 0) {
				return errorString("bad unit")
			}
			return nil
		}})
	registerOp(OpGeoHash, opSpec{name: "GEOHASH", args: argsAtLeast(1), read: readGeoHash, level: 3})
	registerOp(OpGeoSearch, opSpec{name: "GEOSEARCH", args: argsAtLeast(2), flags: geoSearchFlags,
		check: checkGeoSearchAt(0), read: readGeoSearch, level: 3})
	registerOp(OpGeoSearchStore, opSpec{name: "GEOSEARCHSTORE", write: true, args: argsAtLeast(3),
		flags: FlagGeoBox | FlagGeoAsc | FlagGeoDesc | FlagGeoAny | FlagGeoStoreDist | FlagGeoRadius, keys: keysFirst(2),
		check: checkGeoSearchAt(1), apply: applyGeoSearchStore, level: 3})
}

// GeoArea is OpGeoSearch's area argument: the centre (ignored when a
// member step gives it), the radius (or the box's width) and the box's
// height in the unit, and the unit's meters.
func GeoArea(lon, lat, radiusOrWidth, height, conversion float64) []byte {
	b := make([]byte, 0, 40)
	for _, f := range [...]float64{lon, lat, radiusOrWidth, height, conversion} {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
	}
	return b
}

// The steps of a search, run in order after the key's type check, as
// Redis's georadiusGeneric meets them while it parses: a member to look
// up (the centre, when the key exists: could not decode when the set lacks
// it), and errors, which answer only when the key exists or always.
const (
	geoStepMember     = 'm'
	geoStepErrIfFound = 'e'
	geoStepError      = 'E'
)

// GeoStepMember is the step that takes the centre from member.
func GeoStepMember(member []byte) []byte { return append([]byte{geoStepMember}, member...) }

// GeoStepError is the step answering the error text (with its "ERR "),
// only when the key exists unless always.
func GeoStepError(text string, always bool) []byte {
	if always {
		return append([]byte{geoStepError}, text...)
	}
	return append([]byte{geoStepErrIfFound}, text...)
}

func checkGeoSearchAt(at int) func(c *Command) error {
	return func(c *Command) error {
		if len(c.Args[at+1]) != 40 {
			return errorString("bad area")
		}
		for _, st := range c.Args[at+2:] {
			if len(st) == 0 || (st[0] != geoStepMember && st[0] != geoStepErrIfFound && st[0] != geoStepError) {
				return errorString("bad step")
			}
		}
		if c.Int < 0 || (c.Flags&FlagGeoAny != 0 && c.Int == 0) {
			return errorString("bad count")
		}
		for i := range 5 {
			if math.IsNaN(math.Float64frombits(binary.LittleEndian.Uint64(c.Args[at+1][8*i:]))) {
				return errorString("NaN in area")
			}
		}
		return nil
	}
}

// geoPoint is one member a search found (geoPoint).
type geoPoint struct {
	lon, lat, dist, score float64
	member                string
}

// geoSearchLocked runs the search of c whose source key is Args[at]: the
// points found (none when the key does not exist), sorted and cut to
// COUNT, their distances still in meters, and the shape; or an error
// reply that ends it (Kind != ReplyNil).
func (s *Store) geoSearchLocked(now int64, c *Command, at int) (pts []geoPoint, sh geoShape, errr Reply) {
	it, ok, wrong := s.lookupLocked(now, c.Args[at], kindZSet)
	if wrong {
		return nil, sh, replyWrongType
	}
	area := c.Args[at+1]
	f := func(i int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(area[8*i:])) }
	sh = geoShape{box: c.Flags&FlagGeoBox != 0, lon: f(0), lat: f(1), radius: f(2), width: f(2), height: f(3), conversion: f(4)}
	for _, st := range c.Args[at+2:] {
		switch st[0] {
		case geoStepMember:
			if !ok {
				continue
			}
			score, in := zscoreOf(&it, st[1:])
			if !in {
				return nil, sh, ErrorReply(ErrGeoMember)
			}
			sh.lon, sh.lat = decodeGeoScore(score)
		case geoStepErrIfFound:
			if ok {
				return nil, sh, ErrorReply(string(st[1:]))
			}
		case geoStepError:
			return nil, sh, ErrorReply(string(st[1:]))
		}
	}
	if !ok {
		return nil, sh, Reply{}
	}
	count := int(c.Int)
	limit := 0
	if c.Flags&FlagGeoAny != 0 {
		limit = count
	}
	pts = sh.membersOfAllBoxes(zsetView(&it), limit)

	// COUNT sorts (ascending unless DESC), so that the N nearest come
	// back, unless ANY asked for any N.
	asc, desc := c.Flags&FlagGeoAsc != 0, c.Flags&FlagGeoDesc != 0
	if count != 0 && !asc && !desc && c.Flags&FlagGeoAny == 0 {
		asc = true
	}
	returned := len(pts)
	if count != 0 && count < returned {
		returned = count
	}
	if asc || desc {
		cmp := geoCmpAsc
		if desc {
			cmp = geoCmpDesc
		}
		if returned == len(pts) {
			geoMergeSort(pts, cmp)
		} else {
			geoPQSort(pts, cmp, 0, returned-1)
		}
	}
	return pts[:returned], sh, Reply{}
}

// membersOfAllBoxes is membersOfAllNeighbors: the points in the shape
// from each of its boxes in turn, each box's in the set's order, a box
// the same as the last one searched skipped (huge areas make neighbours
// alike), stopping at limit points when limit > 0.
func (sh *geoShape) membersOfAllBoxes(v zview, limit int) []geoPoint {
	boxes := sh.geoBoxes()
	var pts []geoPoint
	last := 0
	for i, b := range boxes {
		if b.isZero() {
			continue
		}
		// Index 0 as "none" is Redis's: the centre's box never stops the
		// next from being searched.
		if last != 0 && b == boxes[last] {
			continue
		}
		if len(pts) > 0 && limit > 0 && len(pts) >= limit {
			break
		}
		pts = sh.pointsInBox(v, b, pts, limit)
		last = i
	}
	return pts
}

// pointsInBox appends the points of the shape whose scores are in the
// box, min <= score < max (geoGetPointsInRange).
func (sh *geoShape) pointsInBox(v zview, b geoHashBits, pts []geoPoint, limit int) []geoPoint {
	lo := float64(geohashAlign52Bits(b))
	b.bits++
	hi := float64(geohashAlign52Bits(b))
	i := v.search(func(e zent) bool { return e.score < lo })
	v.each(i, false, func(e zent) bool {
		if !(e.score < hi) {
			return false
		}
		lon, lat := decodeGeoScore(e.score)
		if d, in := sh.within(lon, lat); in {
			pts = append(pts, geoPoint{lon: lon, lat: lat, dist: d, score: e.score, member: e.member})
		}
		return !(len(pts) > 0 && limit > 0 && len(pts) >= limit)
	})
	return pts
}

// geoCmpAsc is sort_gp_asc: by distance; geoCmpDesc its opposite.
func geoCmpAsc(a, b *geoPoint) int {
	switch {
	case a.dist > b.dist:
		return 1
	case a.dist == b.dist:
		return 0
	}
	return -1
}

func geoCmpDesc(a, b *geoPoint) int { return -geoCmpAsc(a, b) }

// geoMergeSort sorts as the C library's qsort does on Debian's glibc 2.36
// (msort_with_tmp: a stable top-down merge sort), so ties keep the order
// the boxes gave them.
func geoMergeSort(a []geoPoint, cmp func(a, b *geoPoint) int) {
	tmp := make([]geoPoint, len(a))
	var sortRange func(b []geoPoint)
	sortRange = func(b []geoPoint) {
		n := len(b)
		if n <= 1 {
			return
		}
		n1 := n / 2
		b1, b2 := b[:n1], b[n1:]
		sortRange(b1)
		sortRange(b2)
		t := tmp[:0]
		i, j := 0, 0
		for i < len(b1) && j < len(b2) {
			if cmp(&b1[i], &b2[j]) <= 0 {
				t = append(t, b1[i])
				i++
			} else {
				t = append(t, b2[j])
				j++
			}
		}
		t = append(t, b1[i:]...)
		copy(b, t) // what is left of b2 is in place already
	}
	sortRange(a)
}

// geoPQSort is Redis's pqsort (pqsort.c, NetBSD's quicksort that sorts
// only the partitions holding positions lrange..rrange): with COUNT, the
// ties at its edge come out as redis-server's.
func geoPQSort(a []geoPoint, cmp func(a, b *geoPoint) int, lrange, rrange int) {
	pqsortRange(a, 0, len(a), cmp, lrange, rrange)
}

func pqsortRange(a []geoPoint, base, n int, cmp func(a, b *geoPoint) int, lr, rr int) {
	swap := func(i, j int) { a[i], a[j] = a[j], a[i] }
	vecswap := func(i, j, n int) {
		for k := range n {
			swap(i+k, j+k)
		}
	}
	med3 := func(x, y, z int) int {
		if cmp(&a[x], &a[y]) < 0 {
			switch {
			case cmp(&a[y], &a[z]) < 0:
				return y
			case cmp(&a[x], &a[z]) < 0:
				return z
			}
			return x
		}
		switch {
		case cmp(&a[y], &a[z]) > 0:
			return y
		case cmp(&a[x], &a[z]) < 0:
			return x
		}
		return z
	}
	outside := func(first, n int) bool {
		last := first + n - 1
		return (lr < first && rr < first) || (lr > last && rr > last)
	}
	for {
		if n < 7 {
			for pm := base + 1; pm < base+n; pm++ {
				for pl := pm; pl > base && cmp(&a[pl-1], &a[pl]) > 0; pl-- {
					swap(pl, pl-1)
				}
			}
			return
		}
		pm := base + n/2
		if n > 7 {
			pl, pn := base, base+n-1
			if n > 40 {
				d := n / 8
				pl = med3(pl, pl+d, pl+2*d)
				pm = med3(pm-d, pm, pm+d)
				pn = med3(pn-2*d, pn-d, pn)
			}
			pm = med3(pl, pm, pn)
		}
		swap(base, pm)
		pa, pb := base+1, base+1
		pc, pd := base+n-1, base+n-1
		for {
			for pb <= pc {
				r := cmp(&a[pb], &a[base])
				if r > 0 {
					break
				}
				if r == 0 {
					swap(pa, pb)
					pa++
				}
				pb++
			}
			for pb <= pc {
				r := cmp(&a[pc], &a[base])
				if r < 0 {
					break
				}
				if r == 0 {
					swap(pc, pd)
					pd--
				}
				pc--
			}
			if pb > pc {
				break
			}
			swap(pb, pc)
			pb++
			pc--
		}
		pn := base + n
		r := min(pa-base, pb-pa)
		vecswap(base, pb-r, r)
		r = min(pd-pc, pn-pd-1)
		vecswap(pb, pn-r, r)
		if r = pb - pa; r > 1 && !outside(base, r) {
			pqsortRange(a, base, r, cmp, lr, rr)
		}
		if r = pd - pc; r > 1 {
			base, n = pn-r, r
			if !outside(base, n) {
				continue
			}
		}
		return
	}
}

func readGeoSearch(s *Store, now int64, c *Command) Reply {
	pts, sh, errr := s.geoSearchLocked(now, c, 0)
	if errr.Kind != ReplyNil {
		return errr
	}
	withDist, withHash, withCoord := c.Flags&FlagGeoWithDist != 0, c.Flags&FlagGeoWithHash != 0, c.Flags&FlagGeoWithCoord != 0
	out := make([]Reply, len(pts))
	for i := range pts {
		p := &pts[i]
		m := Reply{Kind: ReplyBulk, Bulk: []byte(p.member)}
		if !withDist && !withHash && !withCoord {
			out[i] = m
			continue
		}
		sub := []Reply{m}
		if withDist {
			sub = append(sub, Reply{Kind: ReplyBulk, Bulk: formatGeoDistance(p.dist / sh.conversion)})
		}
		if withHash {
			sub = append(sub, IntReply(cInt64(p.score)))
		}
		if withCoord {
			sub = append(sub, geoCoordReply(p.lon, p.lat))
		}
		out[i] = Reply{Kind: ReplyArray, Array: sub}
	}
	return Reply{Kind: ReplyArray, Array: out}
}

func applyGeoSearchStore(s *Store, now int64, c *Command) Reply {
	pts, sh, errr := s.geoSearchLocked(now, c, 1)
	if errr.Kind != ReplyNil {
		return errr
	}
	ents := make([]zent, len(pts))
	for i, p := range pts {
		ents[i] = zent{score: p.score, member: p.member}
		if c.Flags&FlagGeoStoreDist != 0 {
			ents[i].score = p.dist / sh.conversion
		}
	}
	slices.SortFunc(ents, zentCompare)
	// A member is found once: the boxes are disjoint ranges of scores.
	ents = slices.CompactFunc(ents, func(a, b zent) bool { return a.member == b.member })
	s.storeZSetLocked(now, c.Args[0], ents)
	return IntReply(int64(len(ents)))
}

// geoCoordReply is [longitude, latitude] as addReplyHumanLongDouble sends
// them: doubles in RESP3, bulk strings in RESP2.
func geoCoordReply(lon, lat float64) Reply {
	return Reply{Kind: ReplyArray, Array: []Reply{
		{Kind: ReplyDouble, Bulk: formatGeoCoord(lon)},
		{Kind: ReplyDouble, Bulk: formatGeoCoord(lat)},
	}}
}

func readGeoPos(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindZSet)
	if wrong {
		return replyWrongType
	}
	out := make([]Reply, len(c.Args)-1)
	for i, m := range c.Args[1:] {
		out[i] = Reply{Kind: ReplyNilArray}
		if ok {
			if score, found := zscoreOf(&it, m); found {
				out[i] = geoCoordReply(decodeGeoScore(score))
			}
		}
	}
	return Reply{Kind: ReplyArray, Array: out}
}

func readGeoHash(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindZSet)
	if wrong {
		return replyWrongType
	}
	out := make([]Reply, len(c.Args)-1)
	for i, m := range c.Args[1:] {
		out[i] = replyNil
		if ok {
			if score, found := zscoreOf(&it, m); found {
				out[i] = Reply{Kind: ReplyBulk, Bulk: geohashString(score)}
			}
		}
	}
	return Reply{Kind: ReplyArray, Array: out}
}

func readGeoDist(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindZSet)
	switch {
	case wrong:
		return replyWrongType
	case !ok:
		return replyNil
	}
	s1, ok1 := zscoreOf(&it, c.Args[1])
	s2, ok2 := zscoreOf(&it, c.Args[2])
	if !ok1 || !ok2 {
		return replyNil
	}
	lon1, lat1 := decodeGeoScore(s1)
	lon2, lat2 := decodeGeoScore(s2)
	return Reply{Kind: ReplyBulk, Bulk: formatGeoDistance(geoDistance(lon1, lat1, lon2, lat2) / c.Float)}
}

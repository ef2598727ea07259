package server

import (
	"kvs/fsm"
)

func init() {
	k1 := func(name string, arity int, flags cmdFlags, parse func(*client, [][]byte) (fsm.Command, string)) command {
		return command{name: name, arity: arity, flags: flags, firstKey: 1, lastKey: 1, keyStep: 1, group: "geo", parse: parse, level: 3}
	}
	registerCommands([]command{
		k1("geoadd", -5, w, parseGeoAdd),
		k1("geodist", -4, r, parseGeoDist),
		k1("geohash", -2, r, parseGeoMembers(fsm.OpGeoHash)),
		k1("geopos", -2, r, parseGeoMembers(fsm.OpGeoPos)),
		k1("georadius", -6, w, parseGeoSearch(geoCoords)),
		k1("georadius_ro", -6, r, parseGeoSearch(geoCoords|geoNoStore)),
		k1("georadiusbymember", -5, w, parseGeoSearch(geoMember)),
		k1("georadiusbymember_ro", -5, r, parseGeoSearch(geoMember|geoNoStore)),
		k1("geosearch", -7, r, parseGeoSearch(geoSearch)),
		{name: "geosearchstore", arity: -8, flags: w, firstKey: 1, lastKey: 2, keyStep: 1, group: "geo",
			parse: parseGeoSearch(geoSearch | geoSearchStore), level: 3},
	}...)
	for name, d := range geoDocs {
		commandDocs[name] = d
	}
}

// geoDocs are COMMAND DOCS of the geo commands, as redis-server 7.0
// reports them.
var geoDocs = map[string][2]string{
	"geoadd":               {"Add one or more geospatial items in the geospatial index represented using a sorted set", "3.2.0"},
	"geodist":              {"Returns the distance between two members of a geospatial index", "3.2.0"},
	"geohash":              {"Returns members of a geospatial index as standard geohash strings", "3.2.0"},
	"geopos":               {"Returns longitude and latitude of members of a geospatial index", "3.2.0"},
	"georadius":            {"Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a point", "3.2.0"},
	"georadius_ro":         {"A read-only variant for GEORADIUS", "3.2.10"},
	"georadiusbymember":    {"Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a member", "3.2.0"},
	"georadiusbymember_ro": {"A read-only variant for GEORADIUSBYMEMBER", "3.2.10"},
	"geosearch":            {"Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle.", "6.2.0"},
	"geosearchstore":       {"Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle, and store the result in another key.", "6.2.0"},
}

// Error texts only the geo commands use (geo.c).
const (
	errGeoUnit         = "ERR unsupported unit provided. please use M, KM, FT, MI"
	errGeoRadius       = "ERR need numeric radius"
	errGeoRadiusNeg    = "ERR radius cannot be negative"
	errGeoWidth        = "ERR need numeric width"
	errGeoHeight       = "ERR need numeric height"
	errGeoBoxNeg       = "ERR height or width cannot be negative"
	errGeoCount        = "ERR COUNT must be > 0"
	errGeoAnyCount     = "ERR the ANY argument requires COUNT argument"
	errGeoStoreWith    = "ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
	errGeoSearchStWith = "ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
	errGeoFromPrefix   = "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for "
	errGeoByPrefix     = "ERR exactly one of BYRADIUS and BYBOX can be specified for "
	errGeoPairPrefix   = "ERR invalid longitude,latitude pair "
)

// The units' meters (extractUnitOrReply).
const (
	geoUnitMeters     = 1
	geoUnitKilometers = 1000
	geoUnitFeet       = 0.3048
	geoUnitMiles      = 1609.34
)

// geoUnit is extractUnitOrReply: the unit's meters.
func geoUnit(u []byte) (float64, string) {
	switch {
	case is(u, "m"):
		return geoUnitMeters, ""
	case is(u, "km"):
		return geoUnitKilometers, ""
	case is(u, "ft"):
		return geoUnitFeet, ""
	case is(u, "mi"):
		return geoUnitMiles, ""
	}
	return 0, errGeoUnit
}

// geoLonLat is extractLongLatOrReply: both numbers parsed before the
// range is checked.
func geoLonLat(args [][]byte) (lon, lat float64, e string) {
	lon, ok := fsm.ParseScore(args[0])
	if !ok {
		return 0, 0, errNotFloat
	}
	lat, ok = fsm.ParseScore(args[1])
	if !ok {
		return 0, 0, errNotFloat
	}
	if !fsm.ValidGeoPosition(lon, lat) {
		return 0, 0, errGeoPairPrefix + fsm.FormatGeoPairValue(lon) + "," + fsm.FormatGeoPairValue(lat)
	}
	return lon, lat, ""
}

// geoRadiusArgs is extractDistanceOrReply: a radius and its unit.
func geoRadiusArgs(args [][]byte) (radius, conversion float64, e string) {
	radius, ok := fsm.ParseScore(args[0])
	switch {
	case !ok:
		return 0, 0, errGeoRadius
	case radius < 0:
		return 0, 0, errGeoRadiusNeg
	}
	conversion, e = geoUnit(args[1])
	return radius, conversion, e
}

// geoBoxArgs is extractBoxOrReply: a width, a height and their unit.
func geoBoxArgs(args [][]byte) (width, height, conversion float64, e string) {
	width, ok := fsm.ParseScore(args[0])
	if !ok {
		return 0, 0, 0, errGeoWidth
	}
	height, ok = fsm.ParseScore(args[1])
	switch {
	case !ok:
		return 0, 0, 0, errGeoHeight
	case height < 0 || width < 0:
		return 0, 0, 0, errGeoBoxNeg
	}
	conversion, e = geoUnit(args[2])
	return width, height, conversion, e
}

// parseGeoAdd parses GEOADD key [NX|XX] [CH] longitude latitude member
// ... into the ZADD it is in Redis: the scores are the positions' hashes.
func parseGeoAdd(c *client, args [][]byte) (fsm.Command, string) {
	f, i := zaddOptions(args, fsm.FlagZNX|fsm.FlagZXX|fsm.FlagZCH)
	triples := args[i:]
	// No triple at all is ZADD's syntax error, the same text.
	if len(triples)%3 != 0 || len(triples) == 0 || f&(fsm.FlagZNX|fsm.FlagZXX) == fsm.FlagZNX|fsm.FlagZXX {
		return fsm.Command{}, errSyntax
	}
	cmd := fsm.Command{Op: fsm.OpZAdd, Flags: f, Args: make([][]byte, 1, 1+2*len(triples)/3)}
	cmd.Args[0] = args[1]
	for j := 0; j < len(triples); j += 3 {
		lon, lat, e := geoLonLat(triples[j : j+2])
		if e != "" {
			return fsm.Command{}, e
		}
		cmd.Args = append(cmd.Args, fsm.ScoreArg(fsm.GeoScore(lon, lat)), triples[j+2])
	}
	return cmd, ""
}

// parseGeoDist parses GEODIST key member1 member2 [unit].
func parseGeoDist(c *client, args [][]byte) (fsm.Command, string) {
	conversion := float64(geoUnitMeters)
	switch {
	case len(args) == 5:
		var e string
		if conversion, e = geoUnit(args[4]); e != "" {
			return fsm.Command{}, e
		}
	case len(args) > 5:
		return fsm.Command{}, errSyntax
	}
	return fsm.Command{Op: fsm.OpGeoDist, Args: args[1:4], Float: conversion}, ""
}

func parseGeoMembers(op fsm.Op) func(*client, [][]byte) (fsm.Command, string) {
	return func(c *client, args [][]byte) (fsm.Command, string) {
		return fsm.Command{Op: op, Args: args[1:]}, ""
	}
}

// The forms of georadiusGeneric (geo.c's RADIUS_* and GEOSEARCH* flags).
const (
	geoCoords      = 1 << iota // GEORADIUS: around longitude latitude
	geoMember                  // GEORADIUSBYMEMBER: around a member
	geoNoStore                 // the _RO forms: no STORE or STOREDIST
	geoSearch                  // GEOSEARCH's arguments
	geoSearchStore             // GEOSEARCHSTORE: STOREDIST alone
)

// parseGeoSearch parses the search commands as georadiusGeneric does. Redis
// looks the source key up first and meets the centre member, and its
// absence, as it parses, so a wrong argument may be answered by WRONGTYPE
// or "could not decode requested zset member", or not at all when the key
// is missing (GEORADIUSBYMEMBER's radius): the command carries the members
// to look up and the errors in the order Redis meets them (fsm's steps),
// and the store decides. A command that ends in an error is a read.
func parseGeoSearch(form int) func(*client, [][]byte) (fsm.Command, string) {
	return func(c *client, args [][]byte) (fsm.Command, string) {
		return geoSearchCommand(form, args), ""
	}
}

func geoSearchCommand(form int, args [][]byte) fsm.Command {
	src := 1
	if form&geoSearchStore != 0 {
		src = 2
	}
	var steps [][]byte
	fail := func(e string) fsm.Command {
		steps = append(steps, fsm.GeoStepError(e, true))
		return fsm.Command{Op: fsm.OpGeoSearch, Args: append([][]byte{args[src], fsm.GeoArea(0, 0, 0, 0, 1)}, steps...)}
	}
	var lon, lat, radius, width, height, conversion float64
	var store []byte
	var flags fsm.Flags
	var e string
	base := 2
	switch {
	case form&geoCoords != 0:
		base = 6
		if lon, lat, e = geoLonLat(args[2:4]); e != "" {
			return fail(e)
		}
		if radius, conversion, e = geoRadiusArgs(args[4:6]); e != "" {
			return fail(e)
		}
	case form&geoMember != 0:
		// The member and the radius are looked at only if the key exists.
		base = 5
		steps = append(steps, fsm.GeoStepMember(args[2]))
		if radius, conversion, e = geoRadiusArgs(args[3:5]); e != "" {
			steps = append(steps, fsm.GeoStepError(e, false))
		}
	case form&geoSearchStore != 0:
		base = 3
		store = args[1]
	}

	withDist, withHash, withCoord, takeAny := false, false, false, false
	fromMember, fromLoc, byRadius, byBox := false, false, false, false
	var count int64
	rest := args[base:]
	search := form&geoSearch != 0
	canStore := form&(geoNoStore|geoSearch) == 0
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		left := len(rest) - i - 1
		switch {
		case is(a, "withdist"):
			withDist = true
		case is(a, "withhash"):
			withHash = true
		case is(a, "withcoord"):
			withCoord = true
		case is(a, "any"):
			takeAny = true
		case is(a, "asc"):
			flags = flags&^fsm.FlagGeoDesc | fsm.FlagGeoAsc
		case is(a, "desc"):
			flags = flags&^fsm.FlagGeoAsc | fsm.FlagGeoDesc
		case is(a, "count") && left >= 1:
			n, ok := parseInt(rest[i+1])
			if !ok {
				return fail(errNotInteger)
			}
			if n <= 0 {
				return fail(errGeoCount)
			}
			count = n
			i++
		case is(a, "store") && left >= 1 && canStore:
			store = rest[i+1]
			flags &^= fsm.FlagGeoStoreDist
			i++
		case is(a, "storedist") && left >= 1 && canStore:
			store = rest[i+1]
			flags |= fsm.FlagGeoStoreDist
			i++
		case is(a, "storedist") && search && form&geoSearchStore != 0:
			flags |= fsm.FlagGeoStoreDist
		case is(a, "frommember") && left >= 1 && search && !fromLoc:
			steps = append(steps, fsm.GeoStepMember(rest[i+1]))
			fromMember = true
			i++
		case is(a, "fromlonlat") && left >= 2 && search && !fromMember:
			if lon, lat, e = geoLonLat(rest[i+1 : i+3]); e != "" {
				return fail(e)
			}
			fromLoc = true
			i += 2
		case is(a, "byradius") && left >= 2 && search && !byBox:
			if radius, conversion, e = geoRadiusArgs(rest[i+1 : i+3]); e != "" {
				return fail(e)
			}
			flags &^= fsm.FlagGeoBox
			byRadius = true
			i += 2
		case is(a, "bybox") && left >= 3 && search && !byRadius:
			if width, height, conversion, e = geoBoxArgs(rest[i+1 : i+4]); e != "" {
				return fail(e)
			}
			radius = width
			flags |= fsm.FlagGeoBox
			byBox = true
			i += 3
		default:
			return fail(errSyntax)
		}
	}

	switch {
	case store != nil && (withDist || withHash || withCoord):
		if form&geoSearchStore != 0 {
			return fail(errGeoSearchStWith)
		}
		return fail(errGeoStoreWith)
	case search && !fromMember && !fromLoc:
		return fail(errGeoFromPrefix + string(args[0]))
	case search && !byRadius && !byBox:
		return fail(errGeoByPrefix + string(args[0]))
	case takeAny && count == 0:
		return fail(errGeoAnyCount)
	}
	if takeAny {
		flags |= fsm.FlagGeoAny
	}
	area := fsm.GeoArea(lon, lat, radius, height, conversion)
	if store != nil {
		if !search {
			flags |= fsm.FlagGeoRadius
		}
		return fsm.Command{Op: fsm.OpGeoSearchStore, Flags: flags, Int: count,
			Args: append([][]byte{store, args[src], area}, steps...)}
	}
	flags &^= fsm.FlagGeoStoreDist
	if withDist {
		flags |= fsm.FlagGeoWithDist
	}
	if withHash {
		flags |= fsm.FlagGeoWithHash
	}
	if withCoord {
		flags |= fsm.FlagGeoWithCoord
	}
	return fsm.Command{Op: fsm.OpGeoSearch, Flags: flags, Int: count, Args: append([][]byte{args[src], area}, steps...)}
}

package server

import "strconv"

// CONFIG GET and SET of slot-move-rate, kvs's own parameter on a node of
// a cluster of several groups: the pace, in bytes a second, of the bulk
// copy of a move of slots this node drives as the leader of the slots'
// group (0: no limit). It starts as --slot-move-rate; a change applies at
// once, to a copy under way too, so an operator who sees a move cost the
// other slots too much slows it without stopping it. Like Redis's CONFIG
// SET it is this node's: a move is paced by its source group's leader,
// so set it on every node (or on that one).

func (s *Server) isMoveParam(name string) bool {
	return name == "slot-move-rate" && s.cfg.SlotMoveRate != nil
}

// addMoveParams adds slot-move-rate to CONFIG GET's parameters, in bytes
// as Redis reports its sizes.
func (s *Server) addMoveParams(p map[string]string) {
	if s.cfg.SlotMoveRate != nil {
		p["slot-move-rate"] = strconv.FormatInt(s.cfg.SlotMoveRate.Load(), 10)
	}
}

// checkMoveParam checks a CONFIG SET value of slot-move-rate: bytes, or a
// number with a unit (500kb, 32mb), as --slot-move-rate takes.
func (s *Server) checkMoveParam(name string, val []byte) (apply func(), e string) {
	v, ok := ParseMemory(string(val))
	if !ok || v < 0 {
		return nil, errConfigSetFailed(name, "argument must be a memory value")
	}
	return func() { s.cfg.SlotMoveRate.Store(v) }, ""
}

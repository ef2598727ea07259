package server

func (s *Server) updateNotify() {}

package server

import (
	"strconv"
	"time"
)

// INFO cpu: the CPU time the process and its waited-for children have
// used, from getrusage(2), in Redis's format (seconds with six decimals).
// Redis also reports its main thread's, which runs every command; kvs has
// no such thread (its event loops and goroutines share all the runtime's
// threads), so the *_main_thread fields report the whole process.

// cpuUsage is what getrusage reports; zero where the system has none.
type cpuUsage struct {
	sys, user, childSys, childUser time.Duration
}

func (s *Server) cpuInfo() []InfoField {
	u := readCPUUsage()
	return []InfoField{
		{"used_cpu_sys", seconds(u.sys)},
		{"used_cpu_user", seconds(u.user)},
		{"used_cpu_sys_children", seconds(u.childSys)},
		{"used_cpu_user_children", seconds(u.childUser)},
		{"used_cpu_sys_main_thread", seconds(u.sys)},
		{"used_cpu_user_main_thread", seconds(u.user)},
	}
}

// seconds formats d as Redis prints a struct timeval: "%ld.%06ld".
func seconds(d time.Duration) string {
	us := d.Microseconds()
	frac := strconv.FormatInt(us%1e6, 10)
	return strconv.FormatInt(us/1e6, 10) + "." + "000000"[len(frac):] + frac
}

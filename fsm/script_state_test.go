package fsm

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBudgetStopsAtItsInstruction: whatever the budget, and however it
// falls against the checkpoints, the run stops after its last
// instruction, every time, as the count hook calls checkpoint.
func TestBudgetStopsAtItsInstruction(t *testing.T) {
	for _, limit := range []int64{1, 2, 999, 1000, 1001, 100_999, 101_000, 101_001, 250_000} {
		var st scriptState
		st.begin(nil, "", false, limit)
		var ran int64
		for next := st.first(); ; {
			ran += next
			n, stop := st.checkpoint(next)
			if stop != nil {
				break
			}
			if ran > limit {
				t.Fatalf("budget %d: not stopped after %d instructions", limit, ran)
			}
			next = n
		}
		if ran != limit {
			t.Errorf("budget %d: stopped after %d instructions", limit, ran)
		}
		for range 3 {
			if n, stop := st.checkpoint(1); stop != errBudget || n != 1 {
				t.Fatalf("budget %d: went on after it stopped (%d, %v)", limit, n, stop)
			}
		}
	}
}

// TestScriptKillAndFirstWriteExclude: a killed run's first write is
// refused, and a run that has written cannot be killed.
func TestScriptKillAndFirstWriteExclude(t *testing.T) {
	s := NewStore()
	var st scriptState
	st.begin(s, "sha", false, 0)
	s.busy.add(&st)
	st.busy = true
	if res, kind := s.KillScript(false); res != Killed || kind != BusyEval {
		t.Fatalf("KillScript = %v %v, want Killed", res, kind)
	}
	if st.markDirty() {
		t.Fatal("a killed run may still write")
	}
	st.end()

	st.begin(s, "sha", false, 0)
	s.busy.add(&st)
	st.busy = true
	if !st.markDirty() {
		t.Fatal("a run that was not killed may not write")
	}
	if res, _ := s.KillScript(false); res != KillDirty {
		t.Fatalf("KillScript of a run that wrote = %v, want KillDirty", res)
	}
	st.end()
	if res, _ := s.KillScript(false); res != KillNotBusy || s.ScriptBusy() != NotBusy {
		t.Fatalf("KillScript after the run ended = %v, busy %v", res, s.ScriptBusy())
	}
}

// busyStore is a store whose scripts turn busy after a millisecond.
func busyStore() *Store {
	s := newScriptStore()
	s.SetBusyThreshold(1)
	return s
}

// waitBusy waits until s has a busy script of kind want.
func waitBusy(t *testing.T, s *Store, want Busy) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for s.ScriptBusy() != want {
		if time.Now().After(deadline) {
			t.Fatalf("no busy script of kind %v", want)
		}
		time.Sleep(time.Millisecond) // polling, not synchronisation
	}
}

// TestScriptTurnsBusyAndIsKilled: a script in memory mode's apply that
// runs past the threshold is busy, calls its caller back while it is,
// refuses FUNCTION KILL and stops at SCRIPT KILL, answering Redis's
// error with where it stopped.
func TestScriptTurnsBusyAndIsKilled(t *testing.T) {
	s := busyStore()
	var served atomic.Int64
	done := make(chan []Reply)
	go func() {
		r, ok := s.ApplyServing(nil, 1, []Command{eval("local i = 0\nwhile true do i = i + 1 end", 1, 0)},
			func() { served.Add(1) })
		if !ok {
			t.Error("ApplyServing refused with no script busy")
		}
		done <- r
	}()
	waitBusy(t, s, BusyEval)
	for served.Load() == 0 {
		time.Sleep(time.Millisecond) // polling, not synchronisation
	}
	if r, kind := s.BusyFunctionStats(); kind != BusyEval || r.Kind != 0 {
		t.Fatalf("BusyFunctionStats while an eval is busy = %v %v", r, kind)
	}
	if res, kind := s.KillScript(true); res != KillWrongKind || kind != BusyEval {
		t.Fatalf("FUNCTION KILL of an eval = %v %v", res, kind)
	}
	if res, _ := s.KillScript(false); res != Killed {
		t.Fatalf("SCRIPT KILL = %v", res)
	}
	r := <-done
	want := ErrScriptKilled + " script: " + ScriptSHA([]byte("local i = 0\nwhile true do i = i + 1 end")) + ", on @user_script:2."
	if r[0].Kind != ReplyError || r[0].Str != want {
		t.Fatalf("the killed script's reply = %v, want %q", r[0], want)
	}
	if s.ScriptBusy() != NotBusy {
		t.Fatal("still busy after the script ended")
	}
}

// TestScriptKilledThroughPcall: pcall cannot catch the kill.
func TestScriptKilledThroughPcall(t *testing.T) {
	s := busyStore()
	done := make(chan Reply)
	body := "local f = function() while 1 do redis.call('get', 'k') end end while 1 do pcall(f) end"
	go func() {
		r, _ := s.ReadServing(1, ptr(c(OpEvalRO, body)), nil)
		done <- r
	}()
	waitBusy(t, s, BusyEval)
	if res, _ := s.KillScript(false); res != Killed {
		t.Fatalf("SCRIPT KILL = %v", res)
	}
	if r := <-done; !strings.HasPrefix(r.Str, ErrScriptKilled) {
		t.Fatalf("reply = %v", r)
	}
}

func ptr(c Command) *Command { return &c }

// spinStore is busyStore whose scripts may call SPIN: 1 while spinning
// is set, 0 after, so that a test decides when a script ends.
func spinStore(spinning *atomic.Bool) *Store {
	s := busyStore()
	s.SetCommandParser(func(p *ParseContext, args [][]byte) (Command, Reply, bool) {
		if strings.EqualFold(string(args[0]), "spin") {
			if spinning.Load() {
				return Command{}, IntReply(1), true
			}
			return Command{}, IntReply(0), true
		}
		return testParser(p, args)
	})
	return s
}

// TestScriptKilledBeforeItsFirstWrite: a kill that lands between two
// checkpoints refuses the run's first write, and the run stops at its
// next instruction, a pcall notwithstanding, with the data untouched.
func TestScriptKilledBeforeItsFirstWrite(t *testing.T) {
	s := busyStore()
	// BUSYNOW answers whether the run is busy; KILLNOW kills it.
	s.SetCommandParser(func(p *ParseContext, args [][]byte) (Command, Reply, bool) {
		switch strings.ToLower(string(args[0])) {
		case "busynow":
			if s.ScriptBusy() == NotBusy {
				return Command{}, IntReply(0), true
			}
			return Command{}, IntReply(1), true
		case "killnow":
			if res, _ := s.KillScript(false); res != Killed {
				t.Errorf("SCRIPT KILL = %v", res)
			}
			return Command{}, replyOK, true
		}
		return testParser(p, args)
	})
	body := "while redis.call('busynow') == 0 do end\n" +
		"redis.call('killnow')\nlocal r = redis.pcall('set', 'k', 'v')\nreturn 'went on'"
	r := s.Apply(0, 1, []Command{eval(body, 1, 0)})
	// Stopped at the next instruction, the return's on line 4.
	want := ErrScriptKilled + " script: " + ScriptSHA([]byte(body)) + ", on @user_script:4."
	if r[0].Kind != ReplyError || r[0].Str != want {
		t.Fatalf("reply %v, want %q", r[0], want)
	}
	if v := s.Read(1, c(OpGet, "k")); v.Kind != ReplyNil {
		t.Fatalf("the killed script wrote: %v", v)
	}
}

// TestScriptLoggedWriteUnkillable: a script that may write, in a logged
// entry's apply, cannot be killed: it runs to its end (or budget) on
// every replica. A no-writes one in a logged entry can be.
func TestScriptLoggedWriteUnkillable(t *testing.T) {
	var spinning atomic.Bool
	spinning.Store(true)
	s := spinStore(&spinning)
	done := make(chan []Reply)
	go func() {
		done <- s.Apply(1, 1, []Command{eval("while redis.call('spin') == 1 do end return 'ended'", 1, 0)})
	}()
	waitBusy(t, s, BusyEval)
	if res, _ := s.KillScript(false); res != KillLogged {
		t.Fatalf("SCRIPT KILL of a logged write script = %v, want KillLogged", res)
	}
	spinning.Store(false)
	if r := <-done; string(r[0].Bulk) != "ended" {
		t.Fatalf("reply = %v, want its own", r[0])
	}

	noWrites := eval("#!lua flags=no-writes\nlocal i = 0 while true do i = i + 1 end", 1, 0)
	noWrites.Flags |= FlagScriptNoWrites
	go func() { done <- s.Apply(2, 1, []Command{noWrites}) }()
	waitBusy(t, s, BusyEval)
	if res, _ := s.KillScript(false); res != Killed {
		t.Fatalf("SCRIPT KILL of a no-writes script in a logged entry = %v, want Killed", res)
	}
	if r := <-done; !strings.HasPrefix(r[0].Str, ErrScriptKilled) {
		t.Fatalf("reply = %v", r[0])
	}
}

// TestFunctionBusyStats: FUNCTION STATS while a function is busy names it
// and the command that runs it, without the store's lock.
func TestFunctionBusyStats(t *testing.T) {
	s := busyStore()
	code := "#!lua name=spin\nredis.register_function('spin', function(keys, args) while true do end end)"
	if r := s.Apply(0, 1, []Command{c(OpFunctionLoad, code)}); r[0].Kind == ReplyError {
		t.Fatal(r[0].Str)
	}
	done := make(chan []Reply)
	go func() { done <- s.Apply(0, 1, []Command{fcall("spin", 1, 0, 1, "k", "a")}) }()
	waitBusy(t, s, BusyFunction)
	r, kind := s.BusyFunctionStats()
	if kind != BusyFunction {
		t.Fatalf("kind %v", kind)
	}
	got := string(AppendReplies(nil, []Reply{r}))
	for _, want := range []string{"running_script", "spin", "fcall", "k", "a", "duration_ms", "libraries_count"} {
		if !strings.Contains(got, want) {
			t.Errorf("FUNCTION STATS %q lacks %q", got, want)
		}
	}
	if res, kind := s.KillScript(false); res != KillWrongKind || kind != BusyFunction {
		t.Fatalf("SCRIPT KILL of a function = %v %v", res, kind)
	}
	if res, _ := s.KillScript(true); res != Killed {
		t.Fatalf("FUNCTION KILL = %v", res)
	}
	if r := <-done; !strings.HasPrefix(r[0].Str, ErrScriptKilled+" script: spin, on @user_function:2.") {
		t.Fatalf("reply = %v", r[0])
	}
}

// TestServingCallersGiveUpWhenBusy: reads, writes, WATCH and INFO's
// counts of serving callers waiting for the lock a write script holds end
// once the script is busy, having done nothing; Dirty does not wait.
func TestServingCallersGiveUpWhenBusy(t *testing.T) {
	s := newScriptStore()
	s.SetBusyThreshold(0) // busy only once the test says so
	done := make(chan []Reply)
	go func() {
		done <- s.Apply(0, 1, []Command{eval("local i = 0 while true do i = i + 1 end", 1, 0)})
	}()
	for !s.ScriptRunning() {
		time.Sleep(time.Millisecond) // polling, not synchronisation
	}
	type result struct {
		what string
		ok   bool
	}
	results := make(chan result, 5)
	go func() {
		_, ok := s.ReadServing(1, ptr(c(OpGet, "k")), nil)
		results <- result{"read", ok}
	}()
	go func() {
		_, ok := s.StatsServing(1)
		results <- result{"stats", ok}
	}()
	go func() {
		_, ok := s.ScriptStatsServing()
		results <- result{"script stats", ok}
	}()
	go func() {
		_, ok := s.ApplyServing(nil, 1, []Command{c(OpSet, "k2", "v")}, nil)
		results <- result{"write", ok}
	}()
	go func() {
		_, ok := s.WatchKeyServing(1, []byte("k"))
		results <- result{"watch", ok}
	}()
	// Before the threshold they wait, as Redis's clients do: none may
	// come back (a bounded look, which a slow machine cannot fail).
	select {
	case r := <-results:
		t.Fatalf("%s returned (ok %v) while the script ran, not yet busy", r.what, r.ok)
	case <-time.After(50 * time.Millisecond):
	}
	s.SetBusyThreshold(1)
	for range 5 {
		if r := <-results; r.ok {
			t.Errorf("%s went ahead of a busy script", r.what)
		}
	}
	// INFO's change count is read without the lock the script holds.
	if d := s.Dirty(); d != 0 {
		t.Errorf("Dirty = %d, want 0", d)
	}
	if res, _ := s.KillScript(false); res != Killed {
		t.Fatalf("SCRIPT KILL = %v", res)
	}
	<-done
	if v := s.Read(1, c(OpGet, "k2")); v.Kind != ReplyNil {
		t.Fatalf("the refused write happened: %v", v)
	}
	if _, ok := s.ReadServing(1, ptr(c(OpGet, "k")), nil); !ok {
		t.Fatal("a read refused after the script ended")
	}
}

// TestServingGateUnderLoad: serving callers, plain callers and calls that
// run scripts, all at once, every one of them gets the lock (no script is
// ever busy here), and none deadlocks.
func TestServingGateUnderLoad(t *testing.T) {
	s := newScriptStore()
	const workers, rounds = 8, 300
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			key := "k" + strconv.Itoa(w%3)
			for i := range rounds {
				switch (w + i) % 5 {
				case 0:
					if _, ok := s.ApplyServing(nil, 1, []Command{c(OpSet, key, "v")}, nil); !ok {
						t.Error("ApplyServing refused")
					}
				case 1:
					if _, ok := s.ReadServing(1, ptr(c(OpGet, key)), nil); !ok {
						t.Error("ReadServing refused")
					}
				case 2:
					s.Apply(0, 1, []Command{eval("return redis.call('incr', KEYS[1])", 1, 0, key)})
				case 3:
					if _, ok := s.ApplyServing(nil, 1, []Command{eval("return redis.call('get', KEYS[1])", 1, 0, key)}, nil); !ok {
						t.Error("ApplyServing of a script refused")
					}
				case 4:
					ro := c(OpEvalRO, "return redis.call('get', KEYS[1])", key)
					ro.Int = 1
					if _, ok := s.ReadServing(1, &ro, nil); !ok {
						t.Error("ReadServing of a script refused")
					}
				}
			}
		})
	}
	wg.Wait()
	if s.ScriptRunning() {
		t.Fatal("the gate still counts a script")
	}
}

// TestStopScripts: a stopping store ends the runs a kill leaves no
// replica differing over, written or not, and lets a logged write script
// run on.
func TestStopScripts(t *testing.T) {
	var spinning atomic.Bool
	spinning.Store(true)
	s := spinStore(&spinning)
	memory := make(chan []Reply)
	go func() {
		memory <- s.Apply(0, 1, []Command{eval("redis.call('set', 'k', 'v') while true do end", 1, 0)})
	}()
	waitBusy(t, s, BusyEval)
	s.StopScripts()
	if r := <-memory; !strings.HasPrefix(r[0].Str, ErrScriptKilled) {
		t.Fatalf("memory mode's script after StopScripts: %v", r[0])
	}
	logged := make(chan []Reply)
	go func() {
		logged <- s.Apply(1, 1, []Command{eval("while redis.call('spin') == 1 do end return 'ended'", 1, 0)})
	}()
	waitBusy(t, s, BusyEval)
	spinning.Store(false)
	if r := <-logged; string(r[0].Bulk) != "ended" {
		t.Fatalf("a logged write script after StopScripts: %v", r[0])
	}
}

package main

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// summary is the medians over the rounds of every target, and the ratios that
// say how ours compare with their floors.
type summary struct {
	Targets []targetSummary
	Ratios  []ratio
}

type targetSummary struct {
	Name             string
	EchoP50, EchoP99 time.Duration
	CallsPerSec      float64
	ProgressPerSec   float64
	CPUPerCall       time.Duration
	CPUPerProgress   time.Duration
	RSS              int64
	Lossless         bool
}

// ratio is one of ours against its floor; Better says which way is better.
type ratio struct {
	Name   string
	Value  float64
	Better string // "higher" or "lower"
}

func summarize(targets []*target) summary {
	var s summary
	byName := map[string]targetSummary{}
	for _, t := range targets {
		ts := targetSummary{Name: t.name, Lossless: true}
		var p50, p99 []time.Duration
		var cps, pps []float64
		var cpuCall, cpuProg []time.Duration
		var rss []int64
		for _, r := range t.results {
			p50, p99 = append(p50, r.EchoP50), append(p99, r.EchoP99)
			cps, pps, rss = append(cps, r.CallsPerSec), append(pps, r.ProgressPerSec), append(rss, r.RSS)
			cpuCall, cpuProg = append(cpuCall, r.CPUPerCall), append(cpuProg, r.CPUPerProgress)
			ts.Lossless = ts.Lossless && r.Lossless
		}
		ts.EchoP50, ts.EchoP99 = median(p50), median(p99)
		ts.CallsPerSec, ts.ProgressPerSec, ts.RSS = median(cps), median(pps), median(rss)
		ts.CPUPerCall, ts.CPUPerProgress = median(cpuCall), median(cpuProg)
		s.Targets = append(s.Targets, ts)
		byName[t.name] = ts
	}
	add := func(name string, v float64, better string) {
		s.Ratios = append(s.Ratios, ratio{name, v, better})
	}
	for _, ts := range s.Targets {
		if fl, ok := byName["floor"]; ok && ts.Name != "floor" {
			add(ts.Name+" progress/floor", ts.ProgressPerSec/fl.ProgressPerSec, "higher")
			// The same as CPU: the floor's time per notification over the
			// target's, which other load on the machine moves less.
			if ts.CPUPerProgress > 0 {
				add(ts.Name+" progress-cpu/floor", float64(fl.CPUPerProgress)/float64(ts.CPUPerProgress), "higher")
			}
		}
		if mg, ok := byName["mcpgo"]; ok && ts.Name != "mcpgo" && ts.Name != "floor" {
			add(ts.Name+" echo-p50/mcpgo", float64(ts.EchoP50)/float64(mg.EchoP50), "lower")
			if mg.CPUPerCall > 0 {
				add(ts.Name+" echo-cpu/mcpgo", float64(ts.CPUPerCall)/float64(mg.CPUPerCall), "lower")
			}
		}
		// A store's cost beside the same calls in memory: time and CPU (a
		// paired run at a low rate shows the first less than the second).
		if mem, ok := byName["memory"]; ok && strings.HasPrefix(ts.Name, "datadir") {
			add(ts.Name+" echo-p50/memory", float64(ts.EchoP50)/float64(mem.EchoP50), "lower")
			if mem.CPUPerCall > 0 {
				add(ts.Name+" echo-cpu/memory", float64(ts.CPUPerCall)/float64(mem.CPUPerCall), "lower")
			}
		}
		if k, ok := byName["keyed"]; ok && strings.HasPrefix(ts.Name, "keyed-datadir") {
			add(ts.Name+" echo-p50/keyed", float64(ts.EchoP50)/float64(k.EchoP50), "lower")
			if k.CPUPerCall > 0 {
				add(ts.Name+" echo-cpu/keyed", float64(ts.CPUPerCall)/float64(k.CPUPerCall), "lower")
			}
		}
	}
	return s
}

func median[T int64 | float64 | time.Duration](v []T) T {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

func (s summary) lossless(peers map[string]bool) bool {
	for _, t := range s.Targets {
		if !t.Lossless && !peers[t.Name] {
			return false
		}
	}
	return true
}

func (s summary) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "| target | echo p50 | echo p99 | calls/s | progress/s | CPU/call | CPU/progress | RSS | lossless |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, t := range s.Targets {
		fmt.Fprintf(&b, "| %s | %v | %v | %.0f | %.0f | %v | %v | %d MB | %v |\n", t.Name,
			t.EchoP50.Round(time.Microsecond), t.EchoP99.Round(time.Microsecond), t.CallsPerSec, t.ProgressPerSec,
			t.CPUPerCall.Round(100*time.Nanosecond), t.CPUPerProgress.Round(100*time.Nanosecond), t.RSS>>20, t.Lossless)
	}
	fmt.Fprintf(&b, "\n| ratio | value |\n|---|---|\n")
	for _, r := range s.Ratios {
		fmt.Fprintf(&b, "| %s | %.2f |\n", r.Name, r.Value)
	}
	return b.String()
}

// check compares the ratios with the figures recorded in file: the rows of
// its tables whose first cell is "loadbench: NAME" and whose second is the
// figure. It fails when a ratio is more than 15% worse than its figure.
func (s summary) check(file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	recorded := map[string]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cells := strings.Split(strings.Trim(strings.TrimSpace(sc.Text()), "|"), "|")
		if len(cells) < 2 {
			continue
		}
		name, ok := strings.CutPrefix(strings.TrimSpace(cells[0]), "loadbench: ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(cells[1]), 64)
		if err != nil {
			return fmt.Errorf("%s: the figure of %q: %w", file, name, err)
		}
		recorded[name] = v
	}
	if len(recorded) == 0 {
		return fmt.Errorf("%s records no figure (rows starting | loadbench: NAME |)", file)
	}
	var failed []string
	fmt.Printf("\n| ratio | now | recorded | bound | |\n|---|---|---|---|---|\n")
	for _, r := range s.Ratios {
		want, ok := recorded[r.Name]
		if !ok {
			continue
		}
		bound, bad := want*0.85, r.Value < want*0.85
		if r.Better == "lower" {
			bound, bad = want*1.15, r.Value > want*1.15
		}
		verdict := "ok"
		if bad {
			verdict = "WORSE"
			failed = append(failed, r.Name)
		}
		fmt.Printf("| %s | %.2f | %.2f | %.2f | %s |\n", r.Name, r.Value, want, bound, verdict)
	}
	if len(failed) > 0 {
		return fmt.Errorf("more than 15%% worse than recorded: %s", strings.Join(failed, ", "))
	}
	return nil
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// A command the documentation prints (a line of a ```sh or ```bash block
// in README.md or docs/*.md, or one of the demo's closing hints) is run
// against the demo cluster by `demo check`, so that what we tell a user to
// type keeps working. A command is run unless a rule below says why not:
// a new command is tested by default.
type notRun struct {
	// match is a substring of the command.
	match string
	// why is said in the check's output.
	why string
}

var notRunRules = []notRun{
	{"make ", "a make target: CI runs each of them, the demo among them"},
	{"kubectl edit", "interactive: demo check makes the same edit"},
	{"kubectl delete mosc", "rolls the pool back: demo check follows a change instead"},
	{`"paused":true`, "holds the rollout demo check follows"},
	{"stratactl approve", "the demo's pool does not require approval"},
	{"stratactl reject", "would reject the demo's build"},
	{"--public-key", "the demo's pool does not sign; signing has its e2e spec"},
	{"boot-disk", "builds a disk image (minutes); boot disks have their e2e spec"},
	{"config.example.com", "needs a config server reachable by new nodes; new nodes have their e2e spec"},
	{"logs worker-<hash> -f", "follows a running build; demo check runs the non-following form"},
	{"registry.example.com/strata/", "copies Strata's images to your registry: for a real cluster (the demo's are in 127.0.0.1:5000)"},
	{"create secret docker-registry", "your registry's credentials: for a real cluster (the demo makes its own)"},
	{"-k my-strata/", "applies your own overlay: for a real cluster (the demo installs from config/testcluster)"},
	{"delete role,rolebinding", "an upgrade step from an older install: the demo's install is new"},
	{"kubectl wait mcn/worker-1", "the demo's nodes are named demo-*: the form is run with their name"},
}

// docCommand is one printed command and where it is printed.
type docCommand struct {
	where, line string
}

// docCommands reads the commands of README.md, docs/*.md and the demo's
// closing hints.
func docCommands(root string, hints []string) ([]docCommand, error) {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	var cmds []docCommand
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(root, f)
		cmds = append(cmds, shellLines(rel, raw)...)
	}
	for _, h := range hints {
		cmds = append(cmds, docCommand{where: "the demo's closing words", line: h})
	}
	return cmds, nil
}

// shellLines are the command lines of the ```sh and ```bash blocks of a
// Markdown file, continuation lines joined and comment lines dropped.
func shellLines(file string, md []byte) []docCommand {
	var out []docCommand
	in, cont := false, ""
	loop, start, depth := "", 0, 0
	sc := bufio.NewScanner(bytes.NewReader(md))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		fence := strings.TrimSpace(line)
		switch {
		case !in && (fence == "```sh" || fence == "```bash"):
			in = true
			continue
		case in && fence == "```":
			in = false
			continue
		case !in:
			continue
		}
		if s, ok := strings.CutSuffix(line, `\`); ok {
			cont += s
			continue
		}
		line, cont = cont+line, ""
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		// A loop or a conditional is one command, up to its end.
		if loop != "" {
			loop += "\n" + t
		} else {
			loop, start = t, n
		}
		switch strings.Fields(t)[0] {
		case "for", "while", "until", "if", "case":
			depth++
		case "done", "fi", "esac":
			depth--
		}
		if depth == 0 {
			out = append(out, docCommand{where: fmt.Sprintf("%s:%d", file, start), line: loop})
			loop = ""
		}
	}
	return out
}

// demoValues are what the documentation's placeholders stand for on the
// demo cluster.
type demoValues struct {
	image, build, node string
}

// placeholders replaces the documentation's example names by the demo's.
func (v demoValues) placeholders(line string) string {
	return strings.NewReplacer(
		"registry.example.com/os/worker@sha256:...", v.image,
		"worker-<hash>", v.build,
		"worker-4f2c0a9d1e7b", v.build,
		"worker-4f2c...", v.build,
		"mcn/worker-1", "mcn/"+v.node,
		"mcn worker-1", "mcn "+v.node,
	).Replace(line)
}

// runDocCommands runs every command not ruled out, in the repository's
// root with the demo's kubeconfig and tools, and fails naming each one
// that fails with its output.
func runDocCommands(ctx context.Context, p statePaths, cmds []docCommand, v demoValues, started time.Time) error {
	// go run compiles once; the rest are links from the cache.
	env := append(os.Environ(), "KUBECONFIG="+p.kubeconfig, "PATH="+filepath.Join(p.root, ".infra", "bin")+":"+os.Getenv("PATH"))
	// What the documentation prints is typed without the project's build
	// tags (make sets them): the check runs it so too.
	env = append(env, "GOFLAGS=")
	build := exec.CommandContext(ctx, "go", "build", "-o", os.DevNull, "./cmd/stratactl")
	build.Dir, build.Env = p.root, env
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/stratactl: %w\n%s", err, out)
	}
	var failed []string
	ran, skipped := 0, 0
	for _, c := range cmds {
		if why := ruledOut(c.line); why != "" {
			skipped++
			say(started, "not run (%s): %s", why, c.line)
			continue
		}
		line := v.placeholders(c.line)
		watch := strings.Contains(line, "--watch")
		limit := 2 * time.Minute
		if watch {
			limit = 10 * time.Second
		}
		out, timedOut, err := runCommand(ctx, line, p.root, env, limit)
		ran++
		switch {
		case watch && timedOut && len(bytes.TrimSpace(out)) > 0:
			// A watch runs until stopped: it passes when it showed something.
		case err != nil:
			failed = append(failed, fmt.Sprintf("%s: %s\n  %v\n%s", c.where, line, err, indent(tail(out, 15))))
		}
	}
	say(started, "ran %d commands the documentation prints (%d not run, each said why)", ran, skipped)
	if len(failed) > 0 {
		return fmt.Errorf("%d printed commands fail:\n%s", len(failed), strings.Join(failed, "\n"))
	}
	return nil
}

// runCommand runs line with bash in dir for at most limit, and says
// whether the limit ended it. The command's children (go run's binary)
// end with it: they are killed as its process group, or they would keep
// its output open and the check would wait for them; the output is not
// waited for long after.
func runCommand(ctx context.Context, line, dir string, env []string, limit time.Duration) ([]byte, bool, error) {
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(cctx, "bash", "-o", "pipefail", "-c", line)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return out, errors.Is(cctx.Err(), context.DeadlineExceeded), err
}

func ruledOut(line string) string {
	for _, r := range notRunRules {
		if strings.Contains(line, r.match) {
			return r.why
		}
	}
	return ""
}

// tail is the last n lines of b.
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func indent(s string) string { return "    " + strings.ReplaceAll(s, "\n", "\n    ") }

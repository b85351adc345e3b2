package rrl

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The Grafana dashboard in grafana/ queries the plugin's metrics: these
// tests check that every metric it names is one that metrics.go defines,
// with the labels it uses, and that every query parses as PromQL, with a
// small parser of the part of PromQL a dashboard uses (the module has no
// PromQL parser among its dependencies).

const dashboardFile = "grafana/rrl-dashboard.json"

// definedMetrics reads metrics.go and returns each metric it defines, by
// full name, with its labels: the Name of a CounterOpts or GaugeOpts
// passed with a label list, and the name given to BuildFQName for a Desc.
func definedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "metrics.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "coredns_" + pluginName + "_"
	out := map[string][]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) < 2 {
			return true
		}
		var name string
		var labels []string
		for _, arg := range call.Args {
			switch a := arg.(type) {
			case *ast.CompositeLit:
				if l := stringList(a); l != nil {
					labels = l
				}
				for _, e := range a.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok && fmt.Sprint(kv.Key) == "Name" {
						name = stringLit(kv.Value)
					}
				}
			case *ast.CallExpr:
				if sel, ok := a.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "BuildFQName" && len(a.Args) == 3 {
					name = stringLit(a.Args[2])
				}
			}
		}
		if name != "" && labels != nil {
			out[prefix+name] = labels
		}
		return true
	})
	if len(out) < 8 {
		t.Fatalf("found only %v in metrics.go: the reader is out of date", out)
	}
	return out
}

func stringLit(e ast.Expr) string {
	if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
		s, _ := strconv.Unquote(b.Value)
		return s
	}
	return ""
}

// stringList returns the strings of a []string{...} literal, nil if e is
// not one.
func stringList(c *ast.CompositeLit) []string {
	arr, ok := c.Type.(*ast.ArrayType)
	if !ok || fmt.Sprint(arr.Elt) != "string" {
		return nil
	}
	l := []string{}
	for _, e := range c.Elts {
		l = append(l, stringLit(e))
	}
	return l
}

// dashboard is the part of the dashboard JSON the tests read.
type dashboard struct {
	UID        string
	Title      string
	Panels     []dashboardPanel
	Templating struct {
		List []struct {
			Name  string
			Type  string
			Query any
		}
	}
}

type dashboardPanel struct {
	Title   string
	Type    string
	Targets []struct{ Expr string }
	Panels  []dashboardPanel // a collapsed row's
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// queries returns every PromQL expression of the dashboard, by where it is,
// with Grafana's variables replaced by values of their kind.
func (d dashboard) queries(t *testing.T) map[string]string {
	t.Helper()
	vars := map[string]string{"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}
	out := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = ".*"
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)["query"].(string)
		m := regexp.MustCompile(`^label_values\((.*),\s*(\w+)\)$`).FindStringSubmatch(q)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(SELECTOR, LABEL)", v.Name, q)
			continue
		}
		out["variable "+v.Name] = m[1]
	}
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			for i, tg := range p.Targets {
				out[fmt.Sprintf("panel %q query %d", p.Title, i)] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	variable := regexp.MustCompile(`\$\{?(\w+)\}?`)
	for k, e := range out {
		out[k] = variable.ReplaceAllStringFunc(e, func(s string) string {
			name := strings.Trim(s, "${}")
			v, ok := vars[name]
			if !ok {
				t.Errorf("%s: variable %s is not defined", k, s)
			}
			return v
		})
	}
	return out
}

func TestDashboardQueriesParse(t *testing.T) {
	d := readDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q title %q: both are needed to import it", d.UID, d.Title)
	}
	defined := definedMetrics(t)
	queries := d.queries(t)
	if len(queries) < 10 {
		t.Fatalf("%d queries in %s, want the dashboard's panels", len(queries), dashboardFile)
	}
	used := map[string]bool{}
	for where, q := range queries {
		p := &promParser{src: q}
		if err := p.parse(); err != nil {
			t.Errorf("%s: %q: %v", where, q, err)
			continue
		}
		for _, s := range p.selectors {
			labels, ok := defined[s.metric]
			if !ok {
				t.Errorf("%s: metric %s is not defined in metrics.go", where, s.metric)
				continue
			}
			used[s.metric] = true
			for _, l := range s.labels {
				if !slices.Contains(labels, l) {
					t.Errorf("%s: %s has no label %q (it has %v)", where, s.metric, l, labels)
				}
			}
		}
		for _, l := range p.grouping {
			if !slices.ContainsFunc(p.selectors, func(s selector) bool { return slices.Contains(defined[s.metric], l) }) {
				t.Errorf("%s: groups by %q, a label of none of its metrics", where, l)
			}
		}
	}
	for m := range defined {
		if !used[m] {
			t.Errorf("metric %s is on no panel of the dashboard", m)
		}
	}
}

// TestPromParser: the parser refuses what PromQL refuses, so that the
// dashboard test means something.
func TestPromParser(t *testing.T) {
	for _, ok := range []string{
		`up`,
		`sum by (a) (rate(m{a="x", b=~"y|z"}[5m]))`,
		`sum(rate(m[5m])) by (a) / on (a) group_left sum(m2)`,
		`max(a / b) > bool 0.5`,
		`-m offset 5m`,
		`histogram_quantile(0.9, sum by (le) (rate(m_bucket[1m])))`,
		`topk(5, m)`,
		`{__name__="m"}`,
	} {
		if err := (&promParser{src: ok}).parse(); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{
		`sum(rate(m[5m])`,           // unbalanced
		`sum by (a (m)`,             // unbalanced grouping
		`rate(m{a="x"[5m])`,         // unclosed braces
		`m{a="x}`,                   // unterminated string
		`rates(m[5m])`,              // unknown function
		`rate(m[5])`,                // duration without unit
		`m{a=x}`,                    // matcher value not a string
		`sum(m) +`,                  // missing operand
		`m m`,                       // two expressions
		`sum by (a) (m) by (b)`,     // grouping twice
		`m{a="x",,b="y"}`,           // empty matcher
		`label_values(m, server)`,   // not PromQL
		`sum(rate(m[$__interval]))`, /* variable not replaced */
	} {
		if err := (&promParser{src: bad}).parse(); err == nil {
			t.Errorf("%q: parsed, want an error", bad)
		}
	}
}

// selector is a vector selector's metric and the labels its matchers name.
type selector struct {
	metric string
	labels []string
}

// promParser parses one PromQL expression by recursive descent, and
// records its selectors and the labels it groups by.
type promParser struct {
	src       string
	pos       int
	selectors []selector
	grouping  []string
}

// The functions and aggregations a dashboard may use.
var (
	promFunctions = map[string]bool{
		"rate": true, "irate": true, "increase": true, "delta": true, "idelta": true, "deriv": true,
		"abs": true, "ceil": true, "floor": true, "round": true, "clamp": true, "clamp_min": true, "clamp_max": true,
		"histogram_quantile": true, "label_replace": true, "label_join": true, "vector": true, "scalar": true,
		"time": true, "timestamp": true, "absent": true, "changes": true, "resets": true,
		"avg_over_time": true, "max_over_time": true, "min_over_time": true, "sum_over_time": true, "count_over_time": true,
		"sort": true, "sort_desc": true, "ln": true, "log2": true, "log10": true, "sqrt": true, "exp": true,
	}
	promAggregations = map[string]bool{
		"sum": true, "avg": true, "min": true, "max": true, "count": true, "group": true, "stddev": true, "stdvar": true,
		"topk": true, "bottomk": true, "quantile": true, "count_values": true,
	}
	promBinary = []string{"==", "!=", ">=", "<=", ">", "<", "+", "-", "*", "/", "%", "^"}
	promSets   = map[string]bool{"and": true, "or": true, "unless": true}
)

func (p *promParser) parse() error {
	if err := p.expr(); err != nil {
		return err
	}
	p.space()
	if p.pos != len(p.src) {
		return p.errorf("unexpected %q", p.src[p.pos:])
	}
	return nil
}

func (p *promParser) errorf(format string, a ...any) error {
	return fmt.Errorf("at %d: %s", p.pos, fmt.Sprintf(format, a...))
}

func (p *promParser) space() {
	for p.pos < len(p.src) && unicode.IsSpace(rune(p.src[p.pos])) {
		p.pos++
	}
}

// accept consumes s if it comes next.
func (p *promParser) accept(s string) bool {
	p.space()
	if strings.HasPrefix(p.src[p.pos:], s) {
		p.pos += len(s)
		return true
	}
	return false
}

func (p *promParser) expect(s string) error {
	if !p.accept(s) {
		return p.errorf("want %q", s)
	}
	return nil
}

// ident returns the identifier (metric or label name, keyword) next, or "".
func (p *promParser) ident() string {
	p.space()
	start := p.pos
	for p.pos < len(p.src) {
		c := rune(p.src[p.pos])
		if c == '_' || c == ':' || unicode.IsLetter(c) || (p.pos > start && unicode.IsDigit(c)) {
			p.pos++
			continue
		}
		break
	}
	return p.src[start:p.pos]
}

// peekIdent returns the identifier next without consuming it.
func (p *promParser) peekIdent() string {
	save := p.pos
	id := p.ident()
	p.pos = save
	return id
}

// expr is a chain of binary operations; precedence does not matter for
// whether it parses.
func (p *promParser) expr() error {
	if err := p.unary(); err != nil {
		return err
	}
	for {
		if !p.binaryOp() {
			return nil
		}
		if err := p.unary(); err != nil {
			return err
		}
	}
}

// binaryOp consumes an operator with its modifiers, if one comes next.
func (p *promParser) binaryOp() bool {
	found := false
	for _, op := range promBinary {
		if p.accept(op) {
			found = true
			break
		}
	}
	if !found {
		if !promSets[p.peekIdent()] {
			return false
		}
		p.ident()
	}
	if p.peekIdent() == "bool" {
		p.ident()
	}
	if id := p.peekIdent(); id == "on" || id == "ignoring" {
		p.ident()
		p.labelList()
	}
	if id := p.peekIdent(); id == "group_left" || id == "group_right" {
		p.ident()
		p.space()
		if strings.HasPrefix(p.src[p.pos:], "(") {
			p.labelList()
		}
	}
	return true
}

func (p *promParser) unary() error {
	if p.accept("-") || p.accept("+") {
		return p.unary()
	}
	if err := p.primary(); err != nil {
		return err
	}
	if p.accept("[") { // a range over a subexpression: a subquery
		if err := p.duration(); err != nil {
			return err
		}
		if p.accept(":") {
			p.space()
			if !strings.HasPrefix(p.src[p.pos:], "]") {
				if err := p.duration(); err != nil {
					return err
				}
			}
		}
		if err := p.expect("]"); err != nil {
			return err
		}
	}
	if p.peekIdent() == "offset" {
		p.ident()
		return p.duration()
	}
	return nil
}

func (p *promParser) primary() error {
	p.space()
	if p.pos == len(p.src) {
		return p.errorf("missing operand")
	}
	switch c := p.src[p.pos]; {
	case c == '(':
		p.pos++
		if err := p.expr(); err != nil {
			return err
		}
		return p.expect(")")
	case c == '"' || c == '\'':
		_, err := p.str()
		return err
	case c >= '0' && c <= '9' || c == '.':
		return p.number()
	case c == '{':
		return p.selector("")
	}
	id := p.ident()
	switch {
	case id == "":
		return p.errorf("unexpected %q", p.src[p.pos:])
	case promAggregations[id]:
		return p.aggregation()
	case strings.HasPrefix(p.src[p.pos:], "(") || p.peekParen():
		if !promFunctions[id] {
			return p.errorf("unknown function %q", id)
		}
		return p.call()
	}
	return p.selector(id)
}

// peekParen reports whether "(" comes next, after spaces.
func (p *promParser) peekParen() bool {
	save := p.pos
	p.space()
	ok := strings.HasPrefix(p.src[p.pos:], "(")
	p.pos = save
	return ok
}

func (p *promParser) aggregation() error {
	grouped := false
	if id := p.peekIdent(); id == "by" || id == "without" {
		p.ident()
		if err := p.labelList(); err != nil {
			return err
		}
		grouped = true
	}
	if err := p.call(); err != nil {
		return err
	}
	if id := p.peekIdent(); id == "by" || id == "without" {
		if grouped {
			return p.errorf("grouping given twice")
		}
		p.ident()
		return p.labelList()
	}
	return nil
}

// call parses an argument list.
func (p *promParser) call() error {
	if err := p.expect("("); err != nil {
		return err
	}
	if p.accept(")") {
		return nil
	}
	for {
		if err := p.expr(); err != nil {
			return err
		}
		if p.accept(")") {
			return nil
		}
		if err := p.expect(","); err != nil {
			return err
		}
	}
}

func (p *promParser) labelList() error {
	if err := p.expect("("); err != nil {
		return err
	}
	for !p.accept(")") {
		l := p.ident()
		if l == "" {
			return p.errorf("want a label name")
		}
		p.grouping = append(p.grouping, l)
		if !p.accept(",") {
			if err := p.expect(")"); err != nil {
				return err
			}
			break
		}
	}
	return nil
}

// selector parses the matchers and range of a vector selector whose
// metric name, if any, has been read.
func (p *promParser) selector(metric string) error {
	s := selector{metric: metric}
	if p.accept("{") {
		for !p.accept("}") {
			l := p.ident()
			if l == "" {
				return p.errorf("want a label name")
			}
			if !(p.accept("=~") || p.accept("!~") || p.accept("!=") || p.accept("=")) {
				return p.errorf("want a matcher operator after %q", l)
			}
			v, err := p.str()
			if err != nil {
				return err
			}
			if l == "__name__" {
				s.metric = v
			} else {
				s.labels = append(s.labels, l)
			}
			if !p.accept(",") {
				if err := p.expect("}"); err != nil {
					return err
				}
				break
			}
		}
	}
	if s.metric == "" {
		return p.errorf("a selector without a metric name")
	}
	p.selectors = append(p.selectors, s)
	if p.accept("[") {
		if err := p.duration(); err != nil {
			return err
		}
		return p.expect("]")
	}
	return nil
}

func (p *promParser) str() (string, error) {
	p.space()
	if p.pos == len(p.src) || (p.src[p.pos] != '"' && p.src[p.pos] != '\'') {
		return "", p.errorf("want a string")
	}
	quote := p.src[p.pos]
	for i := p.pos + 1; i < len(p.src); i++ {
		switch p.src[i] {
		case '\\':
			i++
		case quote:
			s := p.src[p.pos+1 : i]
			p.pos = i + 1
			return s, nil
		}
	}
	return "", p.errorf("unterminated string")
}

func (p *promParser) number() error {
	p.space()
	m := regexp.MustCompile(`^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?`).FindString(p.src[p.pos:])
	if m == "" {
		return p.errorf("want a number")
	}
	p.pos += len(m)
	return nil
}

// duration parses a PromQL duration such as 5m or 1h30m.
func (p *promParser) duration() error {
	p.space()
	m := regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+`).FindString(p.src[p.pos:])
	if m == "" {
		return p.errorf("want a duration such as 5m")
	}
	p.pos += len(m)
	return nil
}

package nodeconfig

import "strings"

// installSection is what `systemctl enable` reads from a unit's [Install]
// section.
type installSection struct {
	wantedBy, requiredBy, upheldBy, alias, also []string
	defaultInstance                             string
}

// parseInstall reads the [Install] section of a unit and its drop-ins, in
// that order, as systemd does: drop-ins extend lists, and an empty
// assignment resets a list.
func parseInstall(contents ...string) installSection {
	var in installSection
	for _, c := range contents {
		section := ""
		var cont string
		// Lines as bufio.ScanLines splits them; the CR it drops is space,
		// which TrimSpace drops anyway. No scanner: its buffer was most
		// of what enabling a unit allocated.
		for line := range strings.Lines(c) {
			line = strings.TrimSpace(line)
			if cont != "" {
				line = cont + " " + line
				cont = ""
			}
			if line == "" || line[0] == '#' || line[0] == ';' {
				continue
			}
			if strings.HasSuffix(line, "\\") {
				cont = strings.TrimSuffix(line, "\\")
				continue
			}
			if line[0] == '[' && line[len(line)-1] == ']' {
				section = line[1 : len(line)-1]
				continue
			}
			if section != "Install" {
				continue
			}
			key, value, ok := strings.Cut(line, "=")
			if !ok {
				continue
			}
			key, value = strings.TrimSpace(key), strings.TrimSpace(value)
			var list *[]string
			switch key {
			case "WantedBy":
				list = &in.wantedBy
			case "RequiredBy":
				list = &in.requiredBy
			case "UpheldBy":
				list = &in.upheldBy
			case "Alias":
				list = &in.alias
			case "Also":
				list = &in.also
			case "DefaultInstance":
				in.defaultInstance = value
				continue
			default:
				continue
			}
			if value == "" {
				*list = nil
				continue
			}
			*list = append(*list, strings.Fields(value)...)
		}
	}
	return in
}

// unitSuffix is the type suffix of a unit name (".service"), or "".
func unitSuffix(name string) string {
	i := strings.LastIndexByte(name, '.')
	if i <= 0 {
		return ""
	}
	return name[i:]
}

// validUnitName is a unit name usable as a file name in
// /etc/systemd/system: one path element with a type suffix.
func validUnitName(name string) bool {
	return name != "" && !strings.ContainsAny(name, "/\x00") && name[0] != '.' && unitSuffix(name) != "" &&
		strings.IndexFunc(name, func(r rune) bool { return r <= ' ' || r == 0x7f }) < 0
}

// isTemplate reports whether name is a template unit (foo@.service).
func isTemplate(name string) bool {
	return strings.Contains(name, "@.")
}

// instanceOf names the instance inst of template name.
func instanceOf(name, inst string) string {
	at := strings.Index(name, "@.")
	return name[:at+1] + inst + name[at+1:]
}

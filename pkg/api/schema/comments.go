package schema

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"unicode"
)

// typeDocs are the doc comments of one struct type of pkg/api: the type's own and
// each named field's, by Go field name. Reflection cannot see comments, so the
// generator reads them from the package's sources.
type typeDocs struct {
	doc    string
	fields map[string]string
}

// readComments parses the non-test Go files of dir (pkg/api) and returns the doc
// comments of every struct type, by type name.
func readComments(dir string) (map[string]typeDocs, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, fmt.Errorf("schema: list %s: %w", dir, err)
	}
	out := map[string]typeDocs{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("schema: read %s: %w", f, err)
		}
		file, err := parser.ParseFile(fset, f, src, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("schema: parse %s: %w", f, err)
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				td := typeDocs{doc: paragraph(doc), fields: map[string]string{}}
				prev := ""
				for _, fl := range st.Fields.List {
					text := paragraph(fl.Doc)
					if text == "" {
						text = paragraph(fl.Comment)
					}
					// A field declared under the one whose comment names it shares
					// that comment ("RetryBaseSeconds ... up to RetryMaxSeconds").
					if text == "" && len(fl.Names) > 0 && containsWord(prev, fl.Names[0].Name) {
						text = prev
					}
					for _, n := range fl.Names {
						td.fields[n.Name] = text
					}
					prev = text
				}
				out[ts.Name.Name] = td
			}
		}
	}
	return out, nil
}

// paragraph joins a comment's lines into one paragraph per blank-line-separated
// block, as a description is read in a terminal or an editor's tooltip.
func paragraph(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	var paras []string
	for _, p := range strings.Split(strings.TrimSpace(g.Text()), "\n\n") {
		paras = append(paras, strings.Join(strings.Fields(p), " "))
	}
	return strings.Join(paras, "\n\n")
}

// containsWord says whether text holds word as a whole word.
func containsWord(text, word string) bool {
	for _, w := range strings.FieldsFunc(text, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if w == word {
			return true
		}
	}
	return false
}

//go:build ignore

// gen writes libovsdb models for the Open_vSwitch tables the driver uses. It runs
// libovsdb's modelgen templates on a copy of the schema cut down to those tables,
// so the package carries no code for tables Plinth never touches.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"os"
	"path/filepath"

	"github.com/ovn-org/libovsdb/modelgen"
	"github.com/ovn-org/libovsdb/ovsdb"
)

var tables = []string{"Open_vSwitch", "Bridge", "Port", "Interface"}

func main() {
	schemaPath := flag.String("schema", "/usr/share/openvswitch/vswitch.ovsschema", "OVS schema")
	out := flag.String("o", ".", "output directory")
	pkg := flag.String("p", "model", "package name")
	flag.Parse()
	b, err := os.ReadFile(*schemaPath)
	if err != nil {
		log.Fatal(err)
	}
	var schema ovsdb.DatabaseSchema
	if err := json.Unmarshal(b, &schema); err != nil {
		log.Fatal(err)
	}
	keep := map[string]ovsdb.TableSchema{}
	for _, t := range tables {
		ts, ok := schema.Tables[t]
		if !ok {
			log.Fatalf("schema has no table %s", t)
		}
		keep[t] = ts
	}
	schema.Tables = keep
	gen, err := modelgen.NewGenerator()
	if err != nil {
		log.Fatal(err)
	}
	for name, table := range schema.Tables {
		args := modelgen.GetTableTemplateData(*pkg, name, &table)
		if err := gen.Generate(filepath.Join(*out, modelgen.FileName(name)), modelgen.NewTableTemplate(), args); err != nil {
			log.Fatal(err)
		}
	}
	if err := gen.Generate(filepath.Join(*out, "model.go"), modelgen.NewDBTemplate(), modelgen.GetDBTemplateData(*pkg, schema)); err != nil {
		log.Fatal(err)
	}
}

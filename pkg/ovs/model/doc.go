// Package model holds libovsdb models for the four Open_vSwitch database tables the
// OVS driver reads and writes (Open_vSwitch, Bridge, Port, Interface), generated from
// the OVS 3.1 schema that Debian's openvswitch-common installs. Everything but this
// file and gen.go is generated: run go generate after an OVS schema upgrade.
package model

//go:generate go run gen.go -schema /usr/share/openvswitch/vswitch.ovsschema -o . -p model

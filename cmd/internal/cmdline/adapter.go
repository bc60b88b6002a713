package cmdline

import (
	"fmt"

	"github.com/umbravec/umbra/engine"
)

// Adapter is the adapter-selection flags, the same in every command that
// opens a GPU: embed it with `embed:""`. The values are checked as they
// are read, so a command gets a valid selection or a usage error.
type Adapter struct {
	Backend Choice `name:"backend" choices:"vulkan,metal,dx12,gl" placeholder:"B" help:"only adapters of this graphics API: vulkan, metal, dx12 or gl (default: any, native APIs before GL)"`
	Name    string `name:"adapter" placeholder:"NAME" help:"only adapters whose name, vendor or driver contains NAME, case-insensitively ('umbra probe' lists them)"`
	Power   Choice `name:"power" choices:"high,low" default:"high" placeholder:"P" help:"which adapters come first: high (discrete GPUs) or low (integrated GPUs)"`
}

// Select is the engine's adapter selection these flags ask for.
func (a Adapter) Select() engine.AdapterSelect {
	return engine.AdapterSelect{Backend: string(a.Backend), Name: a.Name, LowPower: a.Power == "low"}
}

// CheckDevice refuses adapter flags under --device cpu, which uses no
// adapter, rather than ignoring them.
func (a Adapter) CheckDevice(d engine.Device) error {
	var flag, value string
	switch {
	case d != engine.CPU:
		return nil
	case a.Backend != "":
		flag, value = "--backend", string(a.Backend)
	case a.Name != "":
		flag, value = "--adapter", a.Name
	case a.Power == "low":
		flag, value = "--power", string(a.Power)
	default:
		return nil
	}
	return fmt.Errorf("%s %s: --device cpu uses no GPU adapter (leave %s out, or pick --device gpu or auto)", flag, value, flag)
}

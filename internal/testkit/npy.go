package testkit

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// NPY builds a version 1.0 .npy file by hand, for headers a writer refuses
// to produce: descr is the dtype ("<f4", ">f4", "<i8"…), shape numpy's
// tuple ("(4, 3)", "(5,)"), and payload follows the header unchecked.
func NPY(descr, shape string, payload []byte) []byte {
	header := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape)
	header += strings.Repeat(" ", (64-(10+len(header)+1)%64)%64) + "\n"
	b := []byte("\x93NUMPY\x01\x00")
	b = binary.LittleEndian.AppendUint16(b, uint16(len(header)))
	b = append(b, header...)
	return append(b, payload...)
}

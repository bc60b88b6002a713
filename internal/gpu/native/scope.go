//go:build cgo && !nogpu

package native

/*
#include <stdint.h>
#include <stddef.h>
#include <string.h>

// The few wgpu-native entry points the binding does not wrap, declared here
// with private type names that match webgpu.h's layout; the symbols come
// from the static library the binding links.
typedef struct WGPUDeviceImpl *umbra_device;
typedef struct { const char *data; size_t length; } umbra_string_view;
typedef void (*umbra_pop_callback)(uint32_t status, uint32_t type, umbra_string_view message, void *userdata1, void *userdata2);
typedef struct {
	void *next_in_chain;
	uint32_t mode;
	umbra_pop_callback callback;
	void *userdata1;
	void *userdata2;
} umbra_pop_info;
typedef struct { uint64_t id; } umbra_future;

extern void wgpuDevicePushErrorScope(umbra_device device, uint32_t filter);
extern umbra_future wgpuDevicePopErrorScope(umbra_device device, umbra_pop_info info);

typedef struct WGPUBufferImpl *umbra_buffer;
typedef struct {
	void *next_in_chain;
	umbra_string_view label;
	uint64_t usage;
	uint64_t size;
	uint32_t mapped_at_creation;
} umbra_buffer_descriptor;
extern umbra_buffer wgpuDeviceCreateBuffer(umbra_device device, const umbra_buffer_descriptor *descriptor);
extern void wgpuBufferRelease(umbra_buffer buffer);

// Timestamps inside a compute pass (wgpu's native feature
// TimestampQueryInsidePasses) and the queue's tick length: the binding
// wraps neither.
typedef struct WGPUComputePassEncoderImpl *umbra_pass;
typedef struct WGPUQuerySetImpl *umbra_query_set;
typedef struct WGPUQueueImpl *umbra_queue;
extern void wgpuComputePassEncoderWriteTimestamp(umbra_pass pass, umbra_query_set set, uint32_t index);
extern float wgpuQueueGetTimestampPeriod(umbra_queue queue);

// umbra_oversized_buffer asks for a storage buffer of size bytes with no
// scope of the binding's around it: the test of this file's scopes.
static void umbra_oversized_buffer(umbra_device d, uint64_t size) {
	umbra_buffer_descriptor desc;
	memset(&desc, 0, sizeof desc);
	desc.usage = 0x80; // Storage
	desc.size = size;
	umbra_buffer b = wgpuDeviceCreateBuffer(d, &desc);
	if (b != NULL) {
		wgpuBufferRelease(b);
	}
}

typedef struct {
	uint32_t type;
	char message[512];
} umbra_scope_result;

static void umbra_pop_cb(uint32_t status, uint32_t type, umbra_string_view message, void *userdata1, void *userdata2) {
	umbra_scope_result *r = (umbra_scope_result *)userdata1;
	r->type = type;
	size_t n = message.length;
	if (message.data == NULL) {
		n = 0;
	} else if (n == (size_t)-1) {
		n = strlen(message.data);
	}
	if (n > sizeof(r->message) - 1) {
		n = sizeof(r->message) - 1;
	}
	if (n > 0) {
		memcpy(r->message, message.data, n);
	}
	r->message[n] = 0;
}

static void umbra_push(umbra_device d) {
	// wgpu-native v29 accepts the Validation and OutOfMemory filters (it
	// aborts on Internal). Popped in reverse: validation sits innermost.
	wgpuDevicePushErrorScope(d, 2); // OutOfMemory
	wgpuDevicePushErrorScope(d, 1); // Validation
}

// umbra_pop pops the two scopes; the callbacks run before the pop returns
// in wgpu-native. The first error found is kept.
static void umbra_pop(umbra_device d, umbra_scope_result *out) {
	out->type = 0;
	out->message[0] = 0;
	for (int i = 0; i < 2; i++) {
		umbra_scope_result r;
		r.type = 0;
		r.message[0] = 0;
		umbra_pop_info info;
		memset(&info, 0, sizeof info);
		info.mode = 2; // AllowProcessEvents
		info.callback = umbra_pop_cb;
		info.userdata1 = &r;
		wgpuDevicePopErrorScope(d, info);
		if (out->type <= 1 && r.type > 1) {
			*out = r;
		}
	}
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/oliverbestmann/webgpu/wgpu"
)

// rawDevice returns the wgpu-native handle inside the binding's Device: its
// first field. The binding exports no accessor for it.
func rawDevice(d *wgpu.Device) C.umbra_device {
	return *(*C.umbra_device)(unsafe.Pointer(d))
}

// Scope runs f inside validation and out-of-memory error scopes of the
// device. Errors the binding does not capture itself — an allocation
// beyond the device's memory, a failed submit — would otherwise reach
// wgpu-native's default handler, which aborts the process; here they
// become an ErrFailed value. The caller holds the driver's device lock.
func (d *Device) Scope(what string, f func() error) error {
	raw := rawDevice(d.device)
	if raw == nil {
		return fmt.Errorf("%w: %s: device is released", errFailed, what)
	}
	C.umbra_push(raw)
	err := call(what, f)
	var r C.umbra_scope_result
	C.umbra_pop(raw, &r)
	if err != nil {
		return err
	}
	if r._type > 1 {
		flushErrorPool()
		kind := map[C.uint32_t]string{2: "validation", 3: "out of memory", 4: "internal", 5: "unknown"}[r._type]
		if kind == "" {
			kind = fmt.Sprintf("error type %d", uint32(r._type))
		}
		return fmt.Errorf("%w: %s: %s: %s", errFailed, what, kind, C.GoString(&r.message[0]))
	}
	return nil
}

// ProvokeValidationError creates, through the C API directly, a buffer
// of size bytes: past maxBufferSize, a validation error only the caller's
// scope can catch. Tests use it to prove Scope's declarations match
// wgpu-native's.
func (d *Device) ProvokeValidationError(size uint64) {
	C.umbra_oversized_buffer(rawDevice(d.device), C.uint64_t(size))
}

// writeTimestamp records the GPU clock into query index of set, at this
// point of the pass.
func writeTimestamp(p *wgpu.ComputePassEncoder, set *wgpu.QuerySet, index uint32) {
	C.wgpuComputePassEncoderWriteTimestamp(*(*C.umbra_pass)(unsafe.Pointer(p)), *(*C.umbra_query_set)(unsafe.Pointer(set)), C.uint32_t(index))
}

// timestampPeriod is the length of one GPU timestamp tick in nanoseconds.
func timestampPeriod(q *wgpu.Queue) float64 {
	return float64(C.wgpuQueueGetTimestampPeriod(*(*C.umbra_queue)(unsafe.Pointer(q))))
}

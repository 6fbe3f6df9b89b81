import { describe, expect, test } from "./support/test-api.ts";

import { deviceCount, deviceInfo, topology } from "../lib/device.ts";
import { ArgumentError, DeviceError } from "../lib/errors.ts";
import { describeGpu, gpuCount } from "./support/gpu.ts";

test("deviceCount works with or without a GPU", () => {
  expect(Number.isInteger(deviceCount())).toBe(true);
  expect(deviceCount()).toBeGreaterThanOrEqual(0);
});

test("deviceInfo of a missing device names the device: ArgumentError past the GPUs there are, DeviceError with none", () => {
  expect(() => deviceInfo(gpuCount())).toThrow(gpuCount() > 0 ? ArgumentError : DeviceError);
  expect(() => deviceInfo(gpuCount())).toThrow(gpuCount() > 0 ? /'device' must be < / : /'device'.*no GPU on this machine/);
});

describeGpu("device properties", 1, () => {
  test("every GPU reports a name, SMs, memory and a compute capability", () => {
    for (let i = 0; i < deviceCount(); i++) {
      const d = deviceInfo(i);
      expect(d.name.length).toBeGreaterThan(0);
      expect(d.smCount).toBeGreaterThan(0);
      expect(d.totalMemory).toBeGreaterThan(d.freeMemory * 0.5);
      expect(d.computeCapability[0]).toBeGreaterThanOrEqual(7);
      expect(d.pciBusId).toMatch(/^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9]$/i);
    }
  });
});

describeGpu("topology", 2, () => {
  test("the peer matrix is square with self on the diagonal, and GPU0 reaches GPU1", () => {
    const t = topology();
    const n = t.devices.length;
    expect(t.peer.length).toBe(n);
    for (let i = 0; i < n; i++) {
      expect(t.peer[i]!.length).toBe(n);
      expect(t.peer[i]![i]!.kind).toBe("self");
    }
    expect(["nvlink", "p2p"]).toContain(t.peer[0]![1]!.kind);
    console.log(`GPU0 -> GPU1: ${JSON.stringify(t.peer[0]![1])}`);
  });
});

import type { onnx as OnnxTypes } from 'onnx-proto';
import onnxProto from 'onnx-proto';

// onnx-proto is CommonJS: its namespace comes through the default export.
export const { onnx } = onnxProto;
export type { OnnxTypes };

/**
 * What keras-to-onnx.ts builds an ONNX graph with: nodes and initializers (weights, stored raw as
 * float32 or int64), and the kernels' layouts from Keras's channels-last to ONNX's channels-first.
 */
export class GraphBuilder {
  readonly nodes: OnnxTypes.INodeProto[] = [];
  readonly initializers: OnnxTypes.ITensorProto[] = [];
  private counter = 0;

  fresh(base: string): string {
    this.counter += 1;
    return `${base}:${this.counter}`;
  }

  constant(name: string, dims: number[], values: Float32Array | number[]): string {
    this.initializers.push({
      name,
      dims,
      dataType: onnx.TensorProto.DataType.FLOAT,
      rawData: new Uint8Array(Float32Array.from(values).buffer),
    });
    return name;
  }

  int64s(name: string, values: number[]): string {
    const raw = new BigInt64Array(values.map((v) => BigInt(v)));
    this.initializers.push({
      name,
      dims: [values.length],
      dataType: onnx.TensorProto.DataType.INT64,
      rawData: new Uint8Array(raw.buffer),
    });
    return name;
  }

  node(
    opType: string,
    inputs: string[],
    output: string,
    attributes: OnnxTypes.IAttributeProto[] = [],
  ): string {
    this.nodes.push({
      opType,
      input: inputs,
      output: [output],
      name: output,
      attribute: attributes,
    });
    return output;
  }
}

export function ints(name: string, values: number[]): OnnxTypes.IAttributeProto {
  return { name, type: onnx.AttributeProto.AttributeType.INTS, ints: values };
}

export function int(name: string, value: number): OnnxTypes.IAttributeProto {
  return { name, type: onnx.AttributeProto.AttributeType.INT, i: value };
}

export function dims4(shape: number[]): [number, number, number, number] {
  if (shape.length !== 4) throw new Error(`a kernel of shape ${JSON.stringify(shape)}`);
  return shape as [number, number, number, number];
}

/** Keras's [kh, kw, in, out] kernel as ONNX's [out, in, kh, kw]. */
export function convKernel(kernel: Float32Array, shape: number[]): Float32Array {
  const [kh, kw, cin, cout] = dims4(shape);
  const out = new Float32Array(kernel.length);
  for (let y = 0; y < kh; y++)
    for (let x = 0; x < kw; x++)
      for (let i = 0; i < cin; i++)
        for (let o = 0; o < cout; o++)
          out[((o * cin + i) * kh + y) * kw + x] = kernel[((y * kw + x) * cin + i) * cout + o] ?? 0;
  return out;
}

/** Keras's depthwise [kh, kw, in, multiplier] kernel as ONNX's grouped [in * multiplier, 1, kh, kw]. */
export function depthwiseKernel(kernel: Float32Array, shape: number[]): Float32Array {
  const [kh, kw, cin, mult] = dims4(shape);
  const out = new Float32Array(kernel.length);
  for (let y = 0; y < kh; y++)
    for (let x = 0; x < kw; x++)
      for (let i = 0; i < cin; i++)
        for (let m = 0; m < mult; m++)
          out[((i * mult + m) * kh + y) * kw + x] =
            kernel[((y * kw + x) * cin + i) * mult + m] ?? 0;
  return out;
}

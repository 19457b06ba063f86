import {
  convKernel,
  depthwiseKernel,
  dims4,
  GraphBuilder,
  int,
  ints,
  type OnnxTypes,
  onnx,
} from './onnx-graph.js';

/**
 * Converts nsfwjs's MobileNetV2 (a Keras layers model as TensorFlow.js saves it: topology and
 * quantized weights) into an ONNX model for onnxruntime, at build time. The ONNX graph takes what
 * nsfwjs's `classify` feeds its model, 224 x 224 RGB values 0-255 (NHWC, float32), divides them by
 * 255 as nsfwjs does, and answers the five class probabilities. It runs channels first (NCHW),
 * onnxruntime's native layout; each batch normalization that follows a convolution is folded into
 * the convolution's weights and bias, which is exact up to float rounding.
 *
 * Only the layer kinds this model uses are known (InputLayer, ZeroPadding2D, Conv2D,
 * DepthwiseConv2D, BatchNormalization, ReLU, Add, AveragePooling2D, Flatten, Dense, Dropout);
 * anything else is an error, never a silently different model.
 */

export interface KerasWeightSpec {
  name: string;
  shape: number[];
  dtype: string;
  quantization?: { min?: number; scale?: number; dtype: string };
}

export interface KerasLayer {
  class_name: string;
  name?: string;
  config: Record<string, unknown> & { name: string };
  inbound_nodes: Array<Array<[string, number, number, unknown?]>>;
}

export interface KerasTopology {
  model_config: {
    class_name: string;
    config: { layers: KerasLayer[]; input_layers: unknown[][]; output_layers: unknown[][] };
  };
}

/** A tensor in the graph being built: its name and, for images, its channels-first shape. */
interface Value {
  name: string;
  /** [channels, height, width] for an image, [features] once flattened. */
  shape: number[];
}

/** The float32 values of every weight, by name, from the weights' bytes as the manifest lays them out. */
export function readWeights(
  specs: readonly KerasWeightSpec[],
  data: Uint8Array,
): Map<string, Float32Array> {
  const weights = new Map<string, Float32Array>();
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const bytesPerValue = (spec: KerasWeightSpec) =>
    spec.quantization === undefined ? 4 : spec.quantization.dtype === 'uint16' ? 2 : 1;
  const described = specs.reduce(
    (sum, spec) => sum + spec.shape.reduce((a, b) => a * b, 1) * bytesPerValue(spec),
    0,
  );
  if (described !== data.byteLength) {
    throw new Error(`weights: ${data.byteLength} bytes, the manifest describes ${described}`);
  }
  let offset = 0;
  for (const spec of specs) {
    const count = spec.shape.reduce((a, b) => a * b, 1);
    const values = new Float32Array(count);
    const quantization = spec.quantization;
    if (spec.dtype !== 'float32') throw new Error(`weight ${spec.name}: dtype ${spec.dtype}`);
    if (quantization === undefined) {
      for (let i = 0; i < count; i++) values[i] = view.getFloat32(offset + 4 * i, true);
      offset += 4 * count;
    } else if (quantization.dtype === 'uint8' || quantization.dtype === 'uint16') {
      // TensorFlow.js's affine quantization: value = min + scale * q.
      const { min = 0, scale = 1 } = quantization;
      const wide = quantization.dtype === 'uint16';
      for (let i = 0; i < count; i++) {
        const q = wide ? view.getUint16(offset + 2 * i, true) : view.getUint8(offset + i);
        values[i] = min + scale * q;
      }
      offset += (wide ? 2 : 1) * count;
    } else {
      throw new Error(`weight ${spec.name}: quantization ${quantization.dtype}`);
    }
    weights.set(spec.name, values);
  }
  return weights;
}

function pair(value: unknown, what: string): [number, number] {
  if (Array.isArray(value) && value.length === 2 && value.every((v) => Number.isInteger(v))) {
    return [value[0] as number, value[1] as number];
  }
  throw new Error(`${what}: expected two integers, got ${JSON.stringify(value)}`);
}

/** TensorFlow's padding of one spatial axis: [before, after] and the output's size. */
function axisPadding(size: number, kernel: number, stride: number, mode: string): number[] {
  if (mode === 'valid') return [0, 0, Math.floor((size - kernel) / stride) + 1];
  if (mode !== 'same') throw new Error(`padding ${mode}`);
  const out = Math.ceil(size / stride);
  const total = Math.max((out - 1) * stride + kernel - size, 0);
  const before = Math.floor(total / 2);
  return [before, total - before, out];
}

/** Converts the model; returns the ONNX model's bytes. */
export function kerasToOnnx(
  topology: KerasTopology,
  specs: readonly KerasWeightSpec[],
  data: Uint8Array,
): Uint8Array {
  const weights = readWeights(specs, data);
  const weight = (name: string): Float32Array => {
    const values = weights.get(name);
    if (values === undefined) throw new Error(`weight ${name} is missing`);
    return values;
  };
  const shapeOf = (name: string): number[] => {
    const spec = specs.find((s) => s.name === name);
    if (spec === undefined) throw new Error(`weight ${name} is missing`);
    return spec.shape;
  };
  const { layers } = topology.model_config.config;
  const consumers = new Map<string, string[]>();
  for (const layer of layers) {
    for (const node of layer.inbound_nodes.flat()) {
      consumers.set(node[0], [...(consumers.get(node[0]) ?? []), layer.config.name]);
    }
  }
  const graph = new GraphBuilder();
  const values = new Map<string, Value>();
  const inputOf = (layer: KerasLayer, index = 0): Value => {
    const inbound = layer.inbound_nodes[0]?.[index];
    const value = inbound && values.get(inbound[0]);
    if (value === undefined) throw new Error(`layer ${layer.config.name}: input ${index} unknown`);
    return value;
  };
  /** Conv layers whose batch normalization was folded in, by the normalization's name. */
  const folded = new Map<string, Value>();
  let inputShape: number[] = [];

  for (const layer of layers) {
    const name = layer.config.name;
    const config = layer.config;
    switch (layer.class_name) {
      case 'InputLayer': {
        const shape = config.batch_input_shape as [null, number, number, number];
        inputShape = [1, shape[1], shape[2], shape[3]];
        const scale = graph.constant('input_scale', [], [255]);
        const scaled = graph.node('Div', ['input', scale], graph.fresh('input_scaled'));
        const nchw = graph.node('Transpose', [scaled], graph.fresh(name), [
          ints('perm', [0, 3, 1, 2]),
        ]);
        values.set(name, { name: nchw, shape: [shape[3], shape[1], shape[2]] });
        break;
      }
      case 'ZeroPadding2D': {
        const from = inputOf(layer);
        const [[top, bottom], [left, right]] = config.padding as [number[], number[]];
        const [c, h, w] = from.shape as [number, number, number];
        const pads = graph.int64s(graph.fresh(`${name}/pads`), [
          0,
          0,
          top ?? 0,
          left ?? 0,
          0,
          0,
          bottom ?? 0,
          right ?? 0,
        ]);
        const out = graph.node('Pad', [from.name, pads], graph.fresh(name));
        values.set(name, {
          name: out,
          shape: [c, h + (top ?? 0) + (bottom ?? 0), w + (left ?? 0) + (right ?? 0)],
        });
        break;
      }
      case 'Conv2D':
      case 'DepthwiseConv2D': {
        const from = inputOf(layer);
        const depthwise = layer.class_name === 'DepthwiseConv2D';
        if (config.activation !== 'linear')
          throw new Error(`${name}: activation ${config.activation}`);
        if (JSON.stringify(config.dilation_rate) !== '[1,1]') throw new Error(`${name}: dilation`);
        const kernelName = `${name}/${depthwise ? 'depthwise_kernel' : 'kernel'}`;
        const kernelShape = shapeOf(kernelName);
        let kernel = depthwise
          ? depthwiseKernel(weight(kernelName), kernelShape)
          : convKernel(weight(kernelName), kernelShape);
        const [kh, kw, cin, last] = dims4(kernelShape);
        const cout = depthwise ? cin * last : last;
        let bias =
          config.use_bias === true ? weight(`${name}/bias`).slice() : new Float32Array(cout);
        const after = consumers.get(name) ?? [];
        const next = layers.find((l) => l.config.name === after[0]);
        const foldable = after.length === 1 && next?.class_name === 'BatchNormalization';
        if (foldable && next !== undefined) {
          // y = gamma * (conv(x) + b - mean) / sqrt(var + eps) + beta, folded per output channel.
          const bn = next.config.name;
          const eps = next.config.epsilon as number;
          const gamma = weight(`${bn}/gamma`);
          const beta = weight(`${bn}/beta`);
          const mean = weight(`${bn}/moving_mean`);
          const variance = weight(`${bn}/moving_variance`);
          const perChannel = kernel.length / cout;
          kernel = kernel.slice();
          bias = bias.slice();
          for (let o = 0; o < cout; o++) {
            const factor = (gamma[o] ?? 1) / Math.sqrt((variance[o] ?? 0) + eps);
            for (let k = o * perChannel; k < (o + 1) * perChannel; k++) {
              kernel[k] = (kernel[k] ?? 0) * factor;
            }
            bias[o] = ((bias[o] ?? 0) - (mean[o] ?? 0)) * factor + (beta[o] ?? 0);
          }
        }
        const [strideH, strideW] = pair(config.strides, `${name} strides`);
        const [c, h, w] = from.shape as [number, number, number];
        if (c !== cin) throw new Error(`${name}: ${c} channels in, the kernel takes ${cin}`);
        const padding = config.padding as string;
        const [top, bottom, outH] = axisPadding(h, kh, strideH, padding) as [
          number,
          number,
          number,
        ];
        const [left, right, outW] = axisPadding(w, kw, strideW, padding) as [
          number,
          number,
          number,
        ];
        const kernelInit = graph.constant(
          graph.fresh(`${name}/W`),
          depthwise ? [cout, 1, kh, kw] : [cout, cin, kh, kw],
          kernel,
        );
        const biasInit = graph.constant(graph.fresh(`${name}/B`), [cout], bias);
        const out = graph.node('Conv', [from.name, kernelInit, biasInit], graph.fresh(name), [
          ints('kernel_shape', [kh, kw]),
          ints('strides', [strideH, strideW]),
          ints('pads', [top, left, bottom, right]),
          int('group', depthwise ? cin : 1),
        ]);
        const value = { name: out, shape: [cout, outH, outW] };
        values.set(name, value);
        if (foldable && next !== undefined) folded.set(next.config.name, value);
        break;
      }
      case 'BatchNormalization': {
        const value = folded.get(name);
        if (value === undefined)
          throw new Error(`${name}: a batch normalization not after a convolution`);
        values.set(name, value);
        break;
      }
      case 'ReLU': {
        const from = inputOf(layer);
        if ((config.negative_slope ?? 0) !== 0 || (config.threshold ?? 0) !== 0) {
          throw new Error(`${name}: a leaky or thresholded ReLU`);
        }
        const max = config.max_value;
        const out =
          typeof max === 'number'
            ? graph.node(
                'Clip',
                [
                  from.name,
                  graph.constant(graph.fresh(`${name}/min`), [], [0]),
                  graph.constant(graph.fresh(`${name}/max`), [], [max]),
                ],
                graph.fresh(name),
              )
            : graph.node('Relu', [from.name], graph.fresh(name));
        values.set(name, { name: out, shape: from.shape });
        break;
      }
      case 'Add': {
        const a = inputOf(layer, 0);
        const b = inputOf(layer, 1);
        if (JSON.stringify(a.shape) !== JSON.stringify(b.shape)) throw new Error(`${name}: shapes`);
        values.set(name, {
          name: graph.node('Add', [a.name, b.name], graph.fresh(name)),
          shape: a.shape,
        });
        break;
      }
      case 'AveragePooling2D': {
        const from = inputOf(layer);
        const [ph, pw] = pair(config.pool_size, `${name} pool_size`);
        const [sh, sw] = pair(config.strides, `${name} strides`);
        if (config.padding !== 'valid') throw new Error(`${name}: padding ${config.padding}`);
        const [c, h, w] = from.shape as [number, number, number];
        const out = graph.node('AveragePool', [from.name], graph.fresh(name), [
          ints('kernel_shape', [ph, pw]),
          ints('strides', [sh, sw]),
        ]);
        values.set(name, {
          name: out,
          shape: [c, Math.floor((h - ph) / sh) + 1, Math.floor((w - pw) / sw) + 1],
        });
        break;
      }
      case 'Flatten': {
        const from = inputOf(layer);
        const [c, h, w] = from.shape as [number, number, number];
        // Keras flattens channels last; with one pixel left the orders agree.
        let source = from.name;
        if (h !== 1 || w !== 1) {
          source = graph.node('Transpose', [source], graph.fresh(`${name}/nhwc`), [
            ints('perm', [0, 2, 3, 1]),
          ]);
        }
        const out = graph.node('Flatten', [source], graph.fresh(name), [int('axis', 1)]);
        values.set(name, { name: out, shape: [c * h * w] });
        break;
      }
      case 'Dense': {
        const from = inputOf(layer);
        const [inputs, units] = shapeOf(`${name}/kernel`) as [number, number];
        if (from.shape[0] !== inputs)
          throw new Error(`${name}: ${from.shape[0]} inputs, not ${inputs}`);
        const kernel = graph.constant(
          graph.fresh(`${name}/W`),
          [inputs, units],
          weight(`${name}/kernel`),
        );
        const bias = graph.constant(
          graph.fresh(`${name}/B`),
          [units],
          config.use_bias === true ? weight(`${name}/bias`) : new Float32Array(units),
        );
        let out = graph.node('Gemm', [from.name, kernel, bias], graph.fresh(name));
        if (config.activation === 'relu')
          out = graph.node('Relu', [out], graph.fresh(`${name}/relu`));
        else if (config.activation === 'softmax') {
          out = graph.node('Softmax', [out], graph.fresh(`${name}/softmax`), [int('axis', 1)]);
        } else if (config.activation !== 'linear') {
          throw new Error(`${name}: activation ${config.activation}`);
        }
        values.set(name, { name: out, shape: [units] });
        break;
      }
      case 'Dropout':
        // Inference: the identity.
        values.set(name, inputOf(layer));
        break;
      default:
        throw new Error(`layer ${name}: kind ${layer.class_name} is not converted`);
    }
  }

  const outputLayer = topology.model_config.config.output_layers[0]?.[0] as string;
  const output = values.get(outputLayer);
  if (output === undefined) throw new Error(`output layer ${outputLayer} unknown`);
  graph.node('Identity', [output.name], 'probabilities');
  const floatType = (dims: number[]): OnnxTypes.ITypeProto => ({
    tensorType: {
      elemType: onnx.TensorProto.DataType.FLOAT,
      shape: { dim: dims.map((dimValue) => ({ dimValue })) },
    },
  });
  const model: OnnxTypes.IModelProto = {
    irVersion: 8,
    opsetImport: [{ domain: '', version: 13 }],
    producerName: 'assay keras-to-onnx',
    graph: {
      name: 'nsfw-mobilenet-v2',
      node: graph.nodes,
      initializer: graph.initializers,
      input: [{ name: 'input', type: floatType(inputShape) }],
      output: [{ name: 'probabilities', type: floatType([1, output.shape[0] as number]) }],
    },
  };
  return onnx.ModelProto.encode(model).finish();
}

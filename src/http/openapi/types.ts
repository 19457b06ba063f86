/** The parts of OpenAPI 3.1 that Assay's descriptor uses, as plain JSON. */

export type JsonSchema = { [keyword: string]: unknown };

export interface Reference {
  $ref: string;
}

export interface Header {
  description: string;
  required?: boolean;
  schema: JsonSchema;
}

export interface MediaType {
  schema: JsonSchema;
}

export interface Response {
  description: string;
  headers?: Record<string, Header | Reference>;
  content?: Record<string, MediaType>;
}

export interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header';
  required: boolean;
  description: string;
  schema: JsonSchema;
}

export interface RequestBody {
  description: string;
  required: boolean;
  content: Record<string, MediaType>;
}

export interface Operation {
  operationId: string;
  summary: string;
  description: string;
  tags: string[];
  parameters?: Parameter[];
  requestBody?: RequestBody;
  responses: Record<string, Response | Reference>;
  security?: Array<Record<string, string[]>>;
}

export type Method = 'get' | 'post' | 'delete';

export type PathItem = Partial<Record<Method, Operation>>;

export interface OpenApiDocument {
  openapi: string;
  info: {
    title: string;
    version: string;
    summary: string;
    description: string;
    license: { name: string; identifier: string };
  };
  servers: Array<{ url: string; description: string }>;
  security: Array<Record<string, string[]>>;
  tags: Array<{ name: string; description: string }>;
  paths: Record<string, PathItem>;
  components: {
    securitySchemes: Record<string, { type: 'http'; scheme: 'basic'; description: string }>;
    schemas: Record<string, JsonSchema>;
    responses: Record<string, Response>;
    headers: Record<string, Header>;
  };
}

export function isReference(value: object): value is Reference {
  return '$ref' in value;
}

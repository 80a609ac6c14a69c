export * from './annotate';
export * from './hover';
export * from './files';
export * from './heatBar';

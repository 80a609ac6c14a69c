export * from './processes';
export * from './session';
export * from './view';
export * from './oom';
export * from './terminal';

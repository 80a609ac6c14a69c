export * from './liveRun';
export * from './view';
export * from './oom';

export * from './messages';
export * from './legacyProtocol';
export * from './sessionProtocol';
export * from './controlMessages';
export * from './voice';
export * from './rigMetadata';

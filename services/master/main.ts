import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { hello } from '#libs/config';

@Module({})
class AppModule {}

const app = await NestFactory.createApplicationContext(AppModule);
app.enableShutdownHooks();
console.log('master ready', hello());

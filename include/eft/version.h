#ifndef EFT_VERSION_H
#define EFT_VERSION_H
#define EFT_VERSION "0.1.0"
#endif

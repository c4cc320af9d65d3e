//! From QEMU's `-kernel` to Rust in 64-bit mode: the PVH entry note and a 32→64-bit trampoline.
//!
//! **The PVH boot ABI** (Xen's `docs/misc/pvh.pandoc`, "PVH boot ABI"; QEMU ≥ 4.0 implements
//! it for ELF kernels given to `-kernel`): the loader places the ELF's segments at their
//! physical addresses and enters at the 32-bit physical address the note
//! `XEN_ELFNOTE_PHYS32_ENTRY` (type 18, owner "Xen", `xen/include/public/elfnote.h`) names, in
//! 32-bit protected mode with paging off: `cs` a flat 32-bit code segment, `ds`/`es`/`ss` flat
//! data segments, interrupts off, `ebx` the physical address of `hvm_start_info`, whose first
//! word is the magic 0x336ec578. There is no stack.
//!
//! **The trampoline** (`pvh_start`, below) does what long mode needs (Intel SDM vol. 3A,
//! "Initializing IA-32e Mode"): it zeroes `.bss`, builds page tables that identity-map the first
//! 4 GiB with 2 MiB pages (PML4 → one PDPT → four page directories; §4.5), loads them into
//! `cr3`, sets `cr4.PAE`, `EFER.LME` (MSR 0xC000_0080), then `cr0.PG`, loads a GDT with a
//! 64-bit code segment and far-returns into it; then loads the data segments, sets the stack
//! and calls [`crate::start`] with the start-info address.
//!
//! Identity mapping is what makes the platform simple: a CPU address *is* the physical address
//! a device is given for DMA (no IOMMU), and a BAR's physical address is where the CPU reaches
//! its registers. Caching of the PCI hole is left to the MTRRs the firmware (SeaBIOS, which runs
//! the PVH option ROM) programmed: uncached there, write-back in RAM.

use core::arch::global_asm;

/// `hvm_start_info.magic` (Xen `xen/include/public/arch-x86/hvm/start_info.h`).
pub(crate) const PVH_START_MAGIC: u32 = 0x336e_c578;

/// Bytes of stack for the Rust code (in `.bss`). Nothing guards its end: an overflow writes
/// over whatever `.bss` holds below it and ends, at worst, in a triple fault (QEMU then exits
/// with status 0 and no result on the console). 64 KiB overflowed once core's IPv4 host, which
/// every domain holds with or without plain UDP, kept its outbox of control frames in
/// frame-sized slots (4 × 2048 bytes instead of 4 × 128): core's objects are built by value
/// before they settle in their storage. Four times that leaves room; it costs `.bss`, not text.
const STACK_LEN: usize = 256 * 1024;

/// The page tables, 4 KiB-aligned: PML4, PDPT, four page directories (4 × 512 × 2 MiB = 4 GiB).
#[repr(C, align(4096))]
struct PageTables([u64; 6 * 512]);

/// The boot stack.
#[repr(C, align(16))]
struct Stack([u8; STACK_LEN]);

// Written by the trampoline only (before any Rust code runs); `static mut` because assembly
// writes them, and Rust never takes a reference to them.
#[no_mangle]
static mut BOOT_PAGE_TABLES: PageTables = PageTables([0; 6 * 512]);
#[no_mangle]
static mut BOOT_STACK: Stack = Stack([0; STACK_LEN]);

global_asm!(
    // The PVH entry note: namesz 4 ("Xen\0"), descsz 4, type 18, then the 32-bit entry.
    ".pushsection .note.pvh, \"a\", @note",
    ".p2align 2",
    ".long 4",
    ".long 4",
    ".long 18",
    ".asciz \"Xen\"",
    ".p2align 2",
    ".long pvh_start",
    ".popsection",
    //
    // The GDT: null, 64-bit code (selector 0x08: L=1, P, DPL 0, execute/read), data (0x10).
    ".pushsection .rodata.boot_gdt, \"a\"",
    ".p2align 3",
    "boot_gdt:",
    ".quad 0",
    ".quad 0x00af9a000000ffff",
    ".quad 0x00cf92000000ffff",
    "boot_gdt_end:",
    "boot_gdt_ptr:",
    ".word boot_gdt_end - boot_gdt - 1",
    ".long boot_gdt",
    ".popsection",
    //
    ".pushsection .text.boot, \"ax\"",
    ".code32",
    ".global pvh_start",
    "pvh_start:",
    "cli",
    "cld",
    "mov esi, ebx", // start-info address, kept for `start`
    // Zero .bss (the loader zero-fills it too; this does not depend on that).
    "mov edi, offset __bss_start",
    "mov ecx, offset __bss_end",
    "sub ecx, edi",
    "xor eax, eax",
    "rep stosb",
    // PML4[0] -> PDPT; PDPT[0..4] -> the four page directories (present, writable).
    "mov edi, offset BOOT_PAGE_TABLES",
    "lea eax, [edi + 0x1000 + 0x3]",
    "mov [edi], eax",
    "lea eax, [edi + 0x2000 + 0x3]",
    "mov [edi + 0x1000], eax",
    "lea eax, [edi + 0x3000 + 0x3]",
    "mov [edi + 0x1008], eax",
    "lea eax, [edi + 0x4000 + 0x3]",
    "mov [edi + 0x1010], eax",
    "lea eax, [edi + 0x5000 + 0x3]",
    "mov [edi + 0x1018], eax",
    // 2048 directory entries: entry i maps i × 2 MiB (present, writable, PS = 2 MiB page).
    "add edi, 0x2000",
    "xor ecx, ecx",
    "2:",
    "mov eax, ecx",
    "shl eax, 21",
    "or eax, 0x83",
    "mov [edi + ecx * 8], eax",
    "inc ecx",
    "cmp ecx, 2048",
    "jne 2b",
    // Long mode: cr3, cr4.PAE, EFER.LME, cr0.PG (with PE, already set).
    "mov eax, offset BOOT_PAGE_TABLES",
    "mov cr3, eax",
    "mov eax, cr4",
    "or eax, 1 << 5",
    "mov cr4, eax",
    "mov ecx, 0xc0000080",
    "rdmsr",
    "or eax, 1 << 8",
    "wrmsr",
    "mov eax, cr0",
    "or eax, (1 << 31) | 1",
    "mov cr0, eax",
    "lgdt [boot_gdt_ptr]",
    // Far return into the 64-bit code segment.
    "push 0x08",
    "mov eax, offset boot_long_mode",
    "push eax",
    "retf",
    ".code64",
    "boot_long_mode:",
    "mov ax, 0x10",
    "mov ds, ax",
    "mov es, ax",
    "mov ss, ax",
    "xor eax, eax",
    "mov fs, ax",
    "mov gs, ax",
    "lea rsp, [rip + BOOT_STACK + {stack_len}]",
    "and rsp, -16",
    "mov edi, esi", // start's argument: the start-info address, zero-extended
    "call {main}",
    "4:",
    "hlt",
    "jmp 4b",
    ".popsection",
    stack_len = const STACK_LEN,
    main = sym crate::start,
);

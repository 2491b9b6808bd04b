//! [`entity!`](crate::entity): one newtype per kind of handle, so an index
//! into one arena cannot be used for another.

/// Declares a typed handle: a `u32` newtype with `index()`, and, when a
/// prefix is given, a `Display` that is its text form (`%3`, `$1`).
///
/// ```
/// tessera_core::entity!(
///     /// A node of some arena.
///     Node, "n"
/// );
/// assert_eq!(Node(3).to_string(), "n3");
/// assert_eq!(Node(3).index(), 3);
/// ```
#[macro_export]
macro_rules! entity {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $crate::entity!($(#[$doc])* $name);

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);

        impl $name {
            /// The index into the arena this handle points into.
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

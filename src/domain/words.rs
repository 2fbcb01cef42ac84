//! Closed sets of words the service stores and prints as text (a top-up's status, a
//! ledger row's kind, an audit line's action, a key's kind): each an enum whose variants
//! have one text, written once here, so a misspelt word fails to compile instead of
//! storing a value no reader expects. The drivers store them as that text
//! (`db::sqlite::decode`, `db::pg::decode`): no schema change.

/// An enum of words: `as_str` (its text), `from_stored` (the inverse), `ALL` and
/// `Display` (the text).
macro_rules! words {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $($(#[$variant_meta:meta])* $variant:ident => $text:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$variant_meta])* $variant,)+
        }

        impl $name {
            /// Every word, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The text stored and shown.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// The word of a stored text; `None` for a text no word has.
            pub fn from_stored(text: &str) -> Option<$name> {
                match text {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

import streamlit as st

st.title("Corpus")
st.info("Coming soon.")
